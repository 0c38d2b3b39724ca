"""How a worker finds the function a job names (docs/envelope.md, "What a worker does"):

1. A by-value function (`pickled`, made by SyncQueue.submit_with({"by_value": True}, fn)) runs only
   where the worker allows it: `allow_pickled`, by default True on a local plane and False on an
   HTTP one, since unpickling runs the pickle's code. Its `runtime` stamp is checked first by
   `runtime_policy`: "strict" (the same Python and cloudpickle versions), "minor" (the same
   Python major.minor; the default) or "off".
2. Otherwise the registry, by the envelope's `fn`.
3. Otherwise `module` (`pkg.mod:qualname`) imported with the worker's `root` first on sys.path.
   An envelope that names no module but whose `fn` has that form (`lakeshore submit gpu
   pkg.mod:train`, a Node producer's `q.submit("pkg.mod:train")`) takes `fn` as its module.
   A worker given a root (or on a local plane) imports as named. An HTTP worker given none takes
   the directory it started in as its root, as the reference does, but confined: it imports only
   a module whose top-level package lives under that directory, never the standard library or an
   installed package, so a producer cannot name `os:system`.

A job this worker cannot or may not run fails at once (no retry: another attempt would fail the
same way), with a message that says why; a refused pickle is never unpickled.
"""
import base64
import importlib
import os
import platform
import re
import sys
import threading
import time
from typing import Any, Callable, Dict, Optional

POLICIES = ("strict", "minor", "off")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_REF = re.compile(r"%s(?:\.%s)*:%s(?:\.%s)*\Z" % (_NAME, _NAME, _NAME, _NAME))


def module_of(env: Dict[str, Any]) -> Optional[str]:
    """Where the job's function lives: its `module`, else its `fn` when that is a `pkg.mod:qualname`."""
    module = env.get("module")
    if isinstance(module, str) and ":" in module:
        return module
    fn = env.get("fn")
    return fn if isinstance(fn, str) and _REF.match(fn) else None
_import_lock = threading.Lock()
# When each module was first imported here (time.time()): a function missing from one whose file
# changed since is most likely new, and the worker runs the code it imported, not the file's.
_imported_at: Dict[str, float] = {}


class Unrunnable(LookupError):
    """A job this worker cannot start: another attempt would fail the same way."""


class Resolver:
    def __init__(self, registry: Optional[Dict[str, Callable[..., Any]]], root: Optional[str], allow_import: bool,
                 allow_pickled: bool, runtime_policy: str, mounts: Any = None, confined: bool = False):
        if runtime_policy not in POLICIES:
            raise ValueError("runtime_policy must be one of %s, got %r" % (", ".join(POLICIES), runtime_policy))
        self.registry = dict(registry or {})
        self.root = root
        self.allow_import = allow_import
        self.allow_pickled = allow_pickled
        self.policy = runtime_policy
        self.mounts = mounts
        self.confined = confined

    def __call__(self, env: Dict[str, Any]) -> Callable[..., Any]:
        # The contract's order: a registry hit first, else the module:qualname import or the pickled
        # blob. Pushed code is its own world: its module comes from the producer's tree only.
        if env.get("code"):
            return self._mounted(env)
        fn = self.registry.get(env["fn"])
        if fn is not None:
            return fn
        if env.get("pickled") is not None:
            return self._unpickle(env)
        module = module_of(env)
        if module is not None:
            if not self.allow_import:
                raise Unrunnable("function %r is not registered with this worker, and it imports no module on an HTTP plane "
                                 "without a root (run_worker(root=...), --root)" % env["fn"])
            return self._import(module)
        import difflib
        near = difflib.get_close_matches(env["fn"], list(self.registry), n=1)
        raise Unrunnable("function %r is not registered with this worker%s, and the job names no module to import it from "
                         "(a function defined in the submitting script itself travels by name only: define it in a module "
                         "under the worker's root, or register it)" % (env["fn"], " (it has %r, perhaps)" % near[0] if near else ""))

    def _mounted(self, env: Dict[str, Any]) -> Callable[..., Any]:
        """A job of the producer's pushed tree (docs/code-mount.md): its module, from that tree only."""
        from .mount import MountError, import_from
        if self.mounts is None:
            raise Unrunnable("this job runs the producer's pushed code (stamp %s), and this worker does not run pushed code: "
                             "run_worker(code=\"mount\") (--code mount) allows it; that runs the producer's code" % env["code"])
        module = module_of(env)
        if module is None:
            raise Unrunnable("a job with pushed code names its module (pkg.mod:func); %r names none" % env["fn"])
        try:
            return import_from(self.mounts.mount(env["code"]), module)
        except MountError as e:
            raise Unrunnable("the pushed code %s could not be mounted: %s" % (env["code"], e))

    def _unpickle(self, env: Dict[str, Any]) -> Callable[..., Any]:
        if not self.allow_pickled:
            raise Unrunnable("this worker does not run pickled functions: unpickling runs the sender's code, so on an HTTP plane "
                             "it needs allow_pickled=True (--allow-pickled)")
        try:
            import cloudpickle
        except ImportError:
            raise Unrunnable("the job's function was pickled, and cloudpickle is not installed on this worker")
        stamp = env.get("runtime") or {}
        mine = {"python": platform.python_version(), "cloudpickle": cloudpickle.__version__}
        if self.policy == "strict" and (stamp.get("python"), stamp.get("cloudpickle")) != (mine["python"], mine["cloudpickle"]):
            raise Unrunnable("runtime_policy 'strict': the function was pickled by Python %s with cloudpickle %s, this worker runs "
                             "Python %s with cloudpickle %s" % (stamp.get("python"), stamp.get("cloudpickle"), mine["python"], mine["cloudpickle"]))
        if self.policy == "minor" and _minor(stamp.get("python")) != _minor(mine["python"]):
            raise Unrunnable("runtime_policy 'minor': the function was pickled by Python %s, this worker runs Python %s"
                             % (stamp.get("python"), mine["python"]))
        try:
            fn = cloudpickle.loads(base64.b64decode(env["pickled"]))
        except Exception as e:
            raise Unrunnable("the pickled function could not be loaded: %s: %s" % (type(e).__name__, e))
        if not callable(fn):
            raise Unrunnable("the pickled value is not a function")
        return fn

    def _import(self, ref: str) -> Callable[..., Any]:
        mod_name, _, qual = ref.partition(":")
        with _import_lock:
            added = self.root is not None and self.root not in sys.path
            if added:
                sys.path.insert(0, self.root)
            try:
                if self.confined:
                    self._under_root(mod_name.partition(".")[0])
                fresh = mod_name not in sys.modules
                obj: Any = importlib.import_module(mod_name)
                if fresh:
                    _imported_at[mod_name] = time.time()
            except ImportError as e:
                # `tasks.py:f` names a file: a module is named without its .py (`tasks:f`).
                hint = "; a module is named without .py: %s:%s" % (mod_name[:-3], qual) if mod_name.endswith(".py") else ""
                raise Unrunnable("could not import %s%s: %s%s" % (mod_name, " under %s" % self.root if self.root else "", e, hint))
            except SyntaxError as e:
                # The same at every attempt: said once, where it is, not retried (importlib's frames say nothing).
                raise Unrunnable("could not import %s%s: %s" % (mod_name, " under %s" % self.root if self.root else "", _syntax_said(e))) from None
            finally:
                if added:
                    sys.path.remove(self.root)
        for part in qual.split("."):
            owner, obj = obj, getattr(obj, part, None)
            if obj is None:
                import difflib
                near = difflib.get_close_matches(part, [n for n in dir(owner) if not n.startswith("_")], n=1)
                raise Unrunnable("%s has no %s%s%s" % (mod_name, qual, " (%s, perhaps)" % near[0] if near else "", _changed_since(mod_name)))
        if not callable(obj):
            raise Unrunnable("%s is not a function" % ref)
        return obj


    def _under_root(self, top: str) -> None:
        """Refuses a module whose top-level package is not under the (implicit) root: found before it is imported."""
        import importlib.util
        root = os.path.realpath(self.root or os.getcwd())
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError) as e:
            raise Unrunnable("could not import %s under %s: %s" % (top, self.root, e))
        if spec is None:
            raise Unrunnable("could not import %s under %s: no module named %r" % (top, self.root, top))
        places = [spec.origin] if spec.origin and spec.has_location else []
        places += list(spec.submodule_search_locations or [])
        if not places or not all(os.path.realpath(p).startswith(root + os.sep) for p in places):
            raise Unrunnable("%s is not a module of this worker's directory %s: a worker started without a root imports only "
                             "modules found there (not the standard library or installed packages); give it a root "
                             "(run_worker(root=...), --root DIR) to import as named" % (top, self.root))


def _minor(version: Optional[str]) -> Optional[str]:
    return ".".join(version.split(".")[:2]) if isinstance(version, str) else None


def _syntax_said(e: SyntaxError) -> str:
    """A syntax error as a compiler says it: `file:line: message`, then the line and a caret."""
    said = "%s:%s: %s" % (os.path.basename(e.filename or "?"), e.lineno, e.msg)
    if e.text:
        line = e.text.rstrip("\n")
        said += "\n    %s\n    %s^" % (line, " " * max(0, (e.offset or 1) - 1))
    return said


def _changed_since(mod_name: str) -> str:
    """What to add to "has no f" when the module's file changed after this process imported it: it runs what it imported."""
    at = _imported_at.get(mod_name)
    path = getattr(sys.modules.get(mod_name), "__file__", None)
    try:
        changed = at is not None and path is not None and os.path.getmtime(path) > at
    except OSError:
        changed = False
    return ("; %s changed after this worker imported it, and a worker runs the code it imported: start it again to run the change"
            % os.path.basename(path)) if changed else ""
