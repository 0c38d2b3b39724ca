"""SyncQueue: the producer's API of the dispatch contract. Submit a function call, by name or by
reference, then wait for its result or stream its values.

>>> q = SyncQueue("gpu")                       # the process's default plane
>>> h = q.submit("train", epochs=3)            # or q.submit(train, epochs=3)
>>> for loss in h.stream(): print(loss)
>>> h.result()
"""
import base64
import contextlib
import importlib
import json
import os
import platform
import secrets
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

from .envelope import encode_envelope
from .tracing import enqueue_span
from .frames import END, VALUE, decode_frame
from .plane import default_dispatch

Fn = Union[str, Callable[..., Any]]


def _json_value(data: Optional[bytes]) -> Any:
    return None if data is None or data == b"" else json.loads(data.decode("utf-8"))


class Handle:
    """A submitted invocation: its id, its queue (None when made from a bare id), and what it gives back."""

    def __init__(self, inv_id: str, dispatch: Any, queue: Optional[str] = None):
        self.id = inv_id
        self.dispatch = dispatch
        self.queue = queue
        #: The outcome as_completed brought back, for the next result() (then asked of the plane again).
        self._ended: Optional[Dict[str, Any]] = None

    def result(self, timeout: Optional[float] = None) -> Any:
        """The decoded return value, waiting as long as the job takes (or `timeout` seconds: then
        Timeout); raises InvocationFailed or InvocationCancelled as the job ended so."""
        ended, self._ended = self._ended, None
        if ended is not None:
            if "error" in ended:
                raise ended["error"]
            return _json_value(ended["result"])
        return _json_value(self.dispatch.result(self.id, timeout=timeout))

    def stream(self, timeout: Optional[float] = None) -> Iterator[Any]:
        """The values the job yields, decoded, as it yields them (a retried attempt starts its
        values over). `timeout` bounds silence between frames (None: no bound). A job that fails
        or is cancelled raises as result() does, after its last value: a loop over the stream does
        not end as if the job went well."""
        last = None
        # None is no bound: journal_read's own default (30 s, the contract's signature) would end the
        # stream of a job that waits in its queue longer than that, as a Timeout.
        for _, frame in self.dispatch.journal_read(self.id, timeout=float("inf") if timeout is None else timeout):
            kind, _, body, _ = decode_frame(frame)
            last = kind
            if kind == VALUE:
                yield _json_value(body)
        if last != END:  # a generator's END says it returned; anything else, the row says how it ended
            self.dispatch.result(self.id, timeout=timeout)

    def get(self) -> Optional[Dict[str, Any]]:
        """The job's row now (state, attempt, error, times), or None once it is deleted."""
        return self.dispatch.get(self.id)

    def cancel(self) -> bool:
        return bool(self.dispatch.cancel(self.id))

    def __repr__(self) -> str:
        return "Handle(%r)" % self.id


def function_ref(fn: Fn) -> Dict[str, Optional[str]]:
    """What an envelope says of `fn`: its name (what a registry knows it by) and, for a function
    defined in an importable module, `module:qualname` (what a worker with a root may import)."""
    if isinstance(fn, str):
        # "pkg.mod:Class.method" names its function "method" (what a registry knows it by).
        return {"fn": fn.rsplit(":", 1)[1].rsplit(".", 1)[-1], "module": fn} if ":" in fn else {"fn": fn, "module": None}
    name = getattr(fn, "__name__", None)
    if not name:
        raise TypeError("submit needs a function or a function's name, got %r" % (fn,))
    mod, qual = getattr(fn, "__module__", None), getattr(fn, "__qualname__", name)
    importable = mod and mod != "__main__" and "<" not in qual
    return {"fn": name, "module": "%s:%s" % (mod, qual) if importable else None}


_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def job_id(now_ms: Optional[int] = None) -> str:
    """The id a submit without one gets, as the Node clients make it (client/ids.ts jobId): 20
    letters and digits, the time in ms first (8, base 62, in ASCII order: a shard's id index takes
    new ids at its end, in full pages), then 12 random (71 bits)."""
    t = int(time.time() * 1000) if now_ms is None else int(now_ms)
    head = ""
    for _ in range(8):
        head = _DIGITS[t % 62] + head
        t //= 62
    return head + "".join(secrets.choice(_DIGITS) for _ in range(12))


def runtime_stamp() -> Dict[str, str]:
    """The interpreter a pickled function was made by (checked by the worker's runtime_policy)."""
    import cloudpickle  # only for by-value functions
    return {"python": platform.python_version(), "cloudpickle": cloudpickle.__version__}


#: Every option submit_with takes: the verb's (HttpDispatch.submit) and the envelope's.
_SUBMIT_WITH = ("id", "key", "priority", "parent", "delay", "run_at", "ttl", "expires_at", "max_attempts",
                "time_limit_ms", "max_retries", "origin", "traceparent", "by_value", "code", "code_dir")
#: What an option submit_with does not take most likely meant: Node's spellings, and the wire's.
_SUBMIT_MEANT = {"delayMs": "delay (seconds)", "delay_ms": "delay (seconds)", "runAt": "run_at (epoch seconds)",
                 "ttlMs": "ttl (seconds)", "ttl_ms": "ttl (seconds)", "expiresAt": "expires_at (epoch seconds)",
                 "maxAttempts": "max_attempts", "maxRetries": "max_retries", "retries": "max_retries",
                 "timeLimitMs": "time_limit_ms", "timeout": "time_limit_ms", "byValue": "by_value", "codeDir": "code_dir"}


#: Every option schedule_with takes, and what one it does not take most likely meant.
_SCHEDULE_WITH = ("timezone", "priority", "time_limit_ms", "max_retries")
_SCHEDULE_MEANT = {"tz": "timezone", "timeZone": "timezone", "timeLimitMs": "time_limit_ms", "timeout": "time_limit_ms",
                   "maxRetries": "max_retries", "retries": "max_retries"}


def _check_options(opts: Dict[str, Any], call: str = "submit_with", known: Tuple[str, ...] = _SUBMIT_WITH,
                   meant: Optional[Dict[str, str]] = None) -> None:
    """Refuses an option `call` does not take, before anything is sent (a pushed tree included),
    naming what it likely meant, as Node's submitWith does."""
    meant = _SUBMIT_MEANT if meant is None else meant
    odd = [k for k in opts if k not in known]
    if odd:
        said = ", ".join("%s (%s, perhaps)" % (k, meant[k]) if k in meant else str(k) for k in odd)
        raise TypeError("%s: no option %s; its options are %s" % (call, said, ", ".join(known)))


def _lineage(parent: Optional[str], origin: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """A new job's parent and origin, where the caller gave none: inside a running job, the job is
    its parent and its origin flows on (origin_for decides)."""
    from .context import _current, origin_of
    job = _current.get()
    if job is not None:
        parent = job.id if parent is None else parent
        origin = origin_of(job) if origin is None else origin
    return parent, origin


def _named(fn: Fn, by_value: bool = False) -> Dict[str, Optional[str]]:
    """function_ref(fn), refusing a lambda: a worker finds a handler by its name, and a lambda has
    none it could be found by."""
    ref = function_ref(fn)
    if ref["fn"] == "<lambda>" and not by_value:
        raise TypeError(
            "a lambda has no name a worker can find: submit a function defined with def, registered by "
            "that name on the worker (or importable from its root), or send it with submit_with({\"by_value\": True}, fn)"
        )
    return ref


class SyncQueue:
    """A named queue on a plane (the process's default one unless `dispatch` is given)."""

    def __init__(self, name: str, dispatch: Any = None):
        self.name = name
        self.dispatch = dispatch if dispatch is not None else default_dispatch()

    def submit(self, fn: Fn, *args: Any, **kwargs: Any) -> Handle:
        """Submits `fn(*args, **kwargs)`: `fn` is a function (its name and module are sent, not its
        code) or a name a worker's registry knows."""
        return self.submit_with({}, fn, *args, **kwargs)

    def submit_with(self, options: Dict[str, Any], fn: Fn, *args: Any, **kwargs: Any) -> Handle:
        """Submits with options: `id`, `key`, `priority`, `parent`, `delay`, `run_at`, `ttl`,
        `expires_at`, `max_attempts` (as HttpDispatch.submit), `time_limit_ms`, `max_retries`,
        `origin`, `traceparent`, and `by_value=True`: the function itself travels, pickled with
        cloudpickle, for workers that allow it (running a pickle is running its code: it is off
        by default on an HTTP plane; docs/envelope.md). `code="push"` pushes the git tree of
        `code_dir` (default: the current directory) and sends its stamp, so a worker with
        `code="mount"` imports the function from exactly that tree (docs/code-mount.md); off by
        default, as it uploads your source tree."""
        with self._submitting(options, fn, args, kwargs) as item:
            envelope = item.pop("envelope")
            return Handle(self.dispatch.submit(self.name, envelope, **item), self.dispatch, self.name)

    @contextlib.contextmanager
    def _submitting(self, options: Dict[str, Any], fn: Fn, args: Any, kwargs: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
        """submit_with's job as submit's arguments (`envelope`, `id`, the options), made inside the
        job's PRODUCER span, which stays open while the caller sends it."""
        opts = dict(options)
        _check_options(opts)
        ref = _named(fn, bool(opts.get("by_value")))
        code = opts.pop("code", None)
        code_dir = opts.pop("code_dir", None)
        if code == "push":  # the producer's git tree, pushed once per tree (docs/code-mount.md)
            if not hasattr(self.dispatch, "push_code"):
                raise TypeError("code transport needs an HTTP plane: a local plane runs this machine's code already")
            code = self.dispatch.push_code(code_dir)
        extra: Dict[str, Any] = {}
        if opts.pop("by_value", False):
            if isinstance(fn, str):
                raise TypeError("by_value needs the function itself, not its name")
            import cloudpickle
            extra = {"pickled": base64.b64encode(cloudpickle.dumps(fn)).decode("ascii"), "runtime": runtime_stamp()}
        if code:
            extra["code"] = code
        parent, origin = _lineage(opts.pop("parent", None), opts.pop("origin", None))
        inv_id = opts.pop("id", None) or job_id()
        with enqueue_span(ref["fn"] or "", self.name):
            envelope = encode_envelope(
                ref["fn"] or "", args, kwargs, module=ref["module"], traceparent=opts.pop("traceparent", None),
                time_limit_ms=opts.pop("time_limit_ms", None), max_retries=opts.pop("max_retries", None),
                origin=origin, extra=extra,
            )
            yield dict(opts, envelope=envelope, id=inv_id, parent=parent)

    def map(self, fn: Fn, *iterables: Any) -> List[Handle]:
        """Submits `fn(*args)` for each tuple of args the iterables give, as the builtin map pairs
        them (`q.map(train, lrs)`, `q.map(add, xs, ys)`), in few requests (submit_many: up to 500
        jobs a request) rather than a round trip a job. Answers their handles, in order
        (`[h.result() for h in q.map(f, xs)]`). Should any job be refused (a full plane, an
        envelope too large), the first refusal is raised once all were tried, its `handles`
        holding each job's Handle, or None where it was refused."""
        ref = _named(fn)
        parent, origin = _lineage(None, None)
        with enqueue_span(ref["fn"] or "", self.name):
            items = [{"envelope": encode_envelope(ref["fn"] or "", args, {}, module=ref["module"], origin=origin),
                      "id": job_id(), **({"parent": parent} if parent is not None else {})} for args in zip(*iterables)]
            answers = self.dispatch.submit_many(self.name, items) if items else []
        handles = [None if isinstance(a, Exception) else Handle(a, self.dispatch, self.name) for a in answers]
        refused = next((a for a in answers if isinstance(a, Exception)), None)
        if refused is not None:
            refused.handles = handles  # type: ignore[attr-defined]
            raise refused
        return handles  # type: ignore[return-value]

    def schedule(self, name: str, cron: str, fn: Fn, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        """Sets (or replaces) this queue's cron schedule `name`: each tick of `cron` (5 fields,
        minute first, or 6, seconds first; docs/contract.md, "Schedules") submits
        `fn(*args, **kwargs)` as submit would. Answers the schedule (`next_at`, epoch ms)."""
        return self.schedule_with({}, name, cron, fn, *args, **kwargs)

    def schedule_with(self, options: Dict[str, Any], name: str, cron: str, fn: Fn, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        """schedule() with options: the cron's `timezone` (IANA, default UTC), the ticks'
        `priority`, and the envelope's `time_limit_ms` and `max_retries`."""
        opts = dict(options)
        _check_options(opts, "schedule_with", _SCHEDULE_WITH, _SCHEDULE_MEANT)
        ref = _named(fn)
        envelope = encode_envelope(ref["fn"] or "", args, kwargs, module=ref["module"],
                                   time_limit_ms=opts.get("time_limit_ms"), max_retries=opts.get("max_retries"), trace=False)
        return self.dispatch.set_schedule(self.name, name, cron=cron, envelope=envelope, timezone=opts.get("timezone"),
                                          priority=opts.get("priority", 0.0))

    def schedules(self) -> List[Dict[str, Any]]:
        """This queue's schedules, by name; `decode_envelope(s["envelope"])` is the call each tick submits."""
        return self.dispatch.list_schedules(self.name)

    def unschedule(self, name: str) -> None:
        """Removes the schedule `name`; an unknown one raises NotFound."""
        self.dispatch.remove_schedule(self.name, name)

    def stream(self, inv: Union[Handle, str], timeout: Optional[float] = None) -> Iterator[Any]:
        """The values of `inv` (a Handle or an id), as Handle.stream."""
        return (inv if isinstance(inv, Handle) else Handle(inv, self.dispatch, self.name)).stream(timeout)

    def __repr__(self) -> str:
        return "SyncQueue(%r)" % self.name


#: The pool of a call its route table does not name.
DEFAULT_POOL = "default"
_ROUTE_KEYS = ("priority", "time_limit_ms", "max_retries")
_routes: Optional[Dict[str, Dict[str, Any]]] = None
_env_routes: Optional[Tuple[str, Dict[str, Dict[str, Any]]]] = None


def routes_of(table: Any, where: str = "the route table") -> Dict[str, Dict[str, Any]]:
    """A route table, checked: `{name: {"queue", "priority"?, "time_limit_ms"?, "max_retries"?}}`
    (the JSON file both languages read; camelCase keys are taken too)."""
    if not isinstance(table, dict):
        raise TypeError("%s must be a dict of routes by name" % where)
    out: Dict[str, Dict[str, Any]] = {}
    camel = {"time_limit_ms": "timeLimitMs", "max_retries": "maxRetries", "priority": "priority"}
    for name, r in table.items():
        if not isinstance(r, dict) or not isinstance(r.get("queue"), str) or not r["queue"]:
            raise TypeError("%s: the route of %r needs a queue" % (where, name))
        route: Dict[str, Any] = {"queue": r["queue"]}
        for k in _ROUTE_KEYS:
            v = r.get(k, r.get(camel[k]))
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                route[k] = v
        out[name] = route
    return out


def set_routes(routes: Optional[Dict[str, Dict[str, Any]]]) -> None:
    """Sets this process's route table (None: back to LAKESHORE_ROUTES, else none)."""
    global _routes
    _routes = None if routes is None else routes_of(routes)


def _process_routes() -> Dict[str, Dict[str, Any]]:
    """set_routes', else LAKESHORE_ROUTES: a JSON file's path, or a module's name whose ROUTES is the table (read once)."""
    global _env_routes
    if _routes is not None:
        return _routes
    spec = os.environ.get("LAKESHORE_ROUTES")
    if not spec:
        return {}
    if _env_routes is None or _env_routes[0] != spec:
        if spec.endswith(".json") or os.path.isfile(spec):
            with open(spec, encoding="utf-8") as f:
                table = json.load(f)
        else:
            table = getattr(importlib.import_module(spec), "ROUTES", None)
        _env_routes = (spec, routes_of(table, "LAKESHORE_ROUTES (%s)" % spec))
    return _env_routes[1]


def dispatch_by_name(name: str, payload: Union[List[Any], Tuple[Any, ...], Dict[str, Any]], *, routes: Optional[Dict[str, Dict[str, Any]]] = None,
                     dispatch: Any = None, id: Optional[str] = None, key: Optional[str] = None) -> Handle:
    """Enqueues `name(payload)` on the pool its route names, without importing any handler:
    `payload` is the arguments (a list) or the keyword arguments (a dict). The routes are `routes`,
    else the process's (set_routes, else LAKESHORE_ROUTES); a name no route names goes to the pool
    `default`, with no options."""
    table = routes_of(routes) if routes is not None else _process_routes()
    route = table.get(name) or {"queue": DEFAULT_POOL}
    opts: Dict[str, Any] = {k: route[k] for k in _ROUTE_KEYS if k in route}
    if id is not None:
        opts["id"] = id
    if key is not None:
        opts["key"] = key
    if isinstance(payload, dict):
        return SyncQueue(route["queue"], dispatch=dispatch).submit_with(opts, name, **payload)
    return SyncQueue(route["queue"], dispatch=dispatch).submit_with(opts, name, *payload)
