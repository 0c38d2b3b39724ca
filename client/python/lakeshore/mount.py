"""Mounted code for Python workers (docs/code-mount.md): a job whose envelope carries a producer's
pushed tree (`code`, a git tree hash) runs `pkg.mod:func` imported from that tree, fetched once per
stamp into `$LAKESHORE_HOME/code/<stamp>`.

An archive is hostile input: its SHA-256 must be the one the plane keeps, and once unpacked its git
tree hash must be the stamp (a worker runs exactly the tree of the producer's commit); every member is checked
before anything is written (no absolute path, no `..`, no link out of the mount, no device or
FIFO, at most MAX_ENTRIES members and MAX_UNPACKED bytes), and `tarfile`'s `data` filter refuses the
same again while extracting. It unpacks into a temporary directory of the cache, then one rename
makes it the mount, so two workers never see half a tree; the cache keeps the CACHE most recently
used stamps. Running pushed code is running the producer's code: a worker does it only when told
(`run_worker(code="mount")`, `--code mount`).
"""
import hashlib
import io
import os
import posixpath
import re
import shutil
import stat
import tarfile
import tempfile
import threading
import time
from typing import Any, Callable, Optional, Tuple

MAX_BYTES = 64 << 20
MAX_UNPACKED = 256 << 20
MAX_ENTRIES = 10_000
CACHE = 16
_STAMP = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_lock = threading.Lock()


class MountError(Exception):
    """A pushed tree that cannot be mounted; the job fails, saying why."""


def _escapes(p: str) -> bool:
    return p.startswith("/") or bool(re.match(r"^[A-Za-z]:", p)) or ".." in p.split("/")


def check_archive(data: bytes) -> None:
    """Every member, checked before anything is written; the first problem is raised."""
    try:
        tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:")
        members = tar.getmembers()
    except tarfile.TarError as e:
        raise MountError("not a tar archive: %s" % e)
    if len(members) > MAX_ENTRIES:
        raise MountError("the archive holds %d entries; a mount takes at most %d" % (len(members), MAX_ENTRIES))
    if sum(m.size for m in members) > MAX_UNPACKED:
        raise MountError("the archive unpacks to more than %d bytes" % MAX_UNPACKED)
    for m in members:
        if not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
            raise MountError("entry %r is a device, FIFO or other special file: an archive of code holds files, directories and links only" % m.name)
        if _escapes(m.name):
            raise MountError("entry %r would be written outside the mount" % m.name)
        if m.issym() or m.islnk():
            to = m.linkname
            target = posixpath.normpath(posixpath.join(posixpath.dirname(m.name), to)) if m.issym() and not to.startswith("/") else to
            if _escapes(target) or target == ".." or target.startswith("../"):
                raise MountError("link %r points outside the mount (%r)" % (m.name, to))


def _object(algo: str, kind: bytes, body: bytes) -> bytes:
    return hashlib.new(algo, b"%s %d\0" % (kind, len(body)) + body).digest()


def _tree(path: str, algo: str) -> Optional[bytes]:
    """The git tree hash of a directory as git archive unpacked it (None: nothing in it)."""
    entries = []
    for name in os.listdir(path):
        full = os.path.join(path, name)
        st = os.lstat(full)
        raw = os.fsencode(name)
        if stat.S_ISDIR(st.st_mode):
            sub = _tree(full, algo)
            if sub:
                entries.append((raw + b"/", b"40000", raw, sub))
        elif stat.S_ISLNK(st.st_mode):
            entries.append((raw, b"120000", raw, _object(algo, b"blob", os.fsencode(os.readlink(full)))))
        elif stat.S_ISREG(st.st_mode):
            with open(full, "rb") as f:
                entries.append((raw, b"100755" if st.st_mode & 0o111 else b"100644", raw, _object(algo, b"blob", f.read())))
    if not entries:
        return None
    entries.sort(key=lambda e: e[0])  # a directory's name taken with a trailing slash, as git orders them
    return _object(algo, b"tree", b"".join(mode + b" " + name + b"\0" + h for _, mode, name, h in entries))


def tree_hash(path: str, stamp: str) -> str:
    """`path`'s git tree hash, in the stamp's kind (SHA-1, or SHA-256 for 64 digits)."""
    algo = "sha256" if len(stamp) == 64 else "sha1"
    h = _tree(path, algo)
    return (h or _object(algo, b"tree", b"")).hex()


class Mounts:
    """The code cache of one worker process: `home` is `$LAKESHORE_HOME/code`."""

    def __init__(self, fetch: Callable[[str], Tuple[bytes, Optional[str]]], home: str, keep: int = CACHE):
        self.fetch, self.home, self.keep = fetch, home, keep

    def mount(self, stamp: str) -> str:
        if not _STAMP.match(stamp or ""):
            raise MountError("stamp %r is not a git tree hash" % stamp)
        path = os.path.join(self.home, stamp)
        if os.path.isdir(path):  # a mount only ever appears by a rename: it is whole
            now = time.time()
            try:
                os.utime(path, (now, now))
            except OSError:
                pass
            return path
        data, sha256 = self.fetch(stamp)
        if len(data) > MAX_BYTES:
            raise MountError("the archive is %d bytes; a mount takes at most %d" % (len(data), MAX_BYTES))
        got = hashlib.sha256(data).hexdigest()
        if got != sha256:
            raise MountError("the archive of %s has SHA-256 %s, not %s: refused" % (stamp, got, sha256 or "(none given)"))
        check_archive(data)
        os.makedirs(self.home, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".tmp-%s-" % stamp[:12], dir=self.home)
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
                tar.extractall(tmp, filter="data")
            # The stamp is the tree's git hash: what was unpacked must be that tree, and nothing else.
            tree = tree_hash(tmp, stamp)
            if tree != stamp:
                raise MountError("the archive is the git tree %s, not %s: refused" % (tree, stamp))
            try:
                os.rename(tmp, path)
            except OSError:
                if not os.path.isdir(path):
                    raise
                shutil.rmtree(tmp, ignore_errors=True)  # another worker mounted it first: the same tree
        except MountError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        except Exception as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise MountError("unpacking %s failed: %s" % (stamp, e))
        self._evict(stamp)
        return path

    def _evict(self, current: str) -> None:
        names = [n for n in os.listdir(self.home) if _STAMP.match(n) and n != current]
        if len(names) < self.keep:
            return
        names.sort(key=lambda n: os.path.getmtime(os.path.join(self.home, n)), reverse=True)
        for n in names[self.keep - 1:]:
            shutil.rmtree(os.path.join(self.home, n), ignore_errors=True)


def mounts_for(dispatch: Any, home: Optional[str] = None) -> Mounts:
    """The code cache of a worker on `dispatch` (an HttpDispatch: pushed code lives on the plane)."""
    fetch = getattr(dispatch, "fetch_code", None)
    if fetch is None:
        raise ValueError("code='mount' needs an HTTP plane: pushed code lives there (a local plane runs this machine's code)")
    base = home or os.path.join(os.environ.get("LAKESHORE_HOME") or os.path.join(os.path.expanduser("~"), ".lakeshore"), "code")
    return Mounts(fetch, base)


def import_from(root: str, ref: str) -> Callable[..., Any]:
    """`pkg.mod:qualname` imported from a mounted tree: a fresh module per stamp (the same module
    name at two stamps is two modules)."""
    import importlib.util
    import sys
    mod_name, _, qual = ref.partition(":")
    rel = mod_name.replace(".", os.sep)
    for cand in (os.path.join(root, rel + ".py"), os.path.join(root, rel, "__init__.py")):
        if os.path.isfile(cand):
            break
    else:
        raise MountError("module %s is not in the pushed tree" % mod_name)
    key = "lakeshore_mount_%s_%s" % (os.path.basename(root), mod_name.replace(".", "_"))
    with _lock:
        module = sys.modules.get(key)
        if module is None:
            spec = importlib.util.spec_from_file_location(key, cand, submodule_search_locations=None)
            module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
            sys.path.insert(0, root)
            try:
                spec.loader.exec_module(module)  # type: ignore[union-attr]
            finally:
                sys.path.remove(root)
            sys.modules[key] = module
    obj: Any = module
    for part in qual.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise MountError("%s has no %s" % (mod_name, qual))
    return obj

