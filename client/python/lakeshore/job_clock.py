"""The worker's threads for its running jobs: one that sends every job's heartbeats, and one
reused to run each job's call under its time limit.

A job used to start two threads of its own: one for its heartbeats, and one to run its call so
that the worker could leave a call running past its limit (Python cannot stop a thread). Starting
them took about half of a worker's time on short jobs. Here the heartbeats of every job in the
process come from one thread, and the calls run on a thread that is handed the next call when it
is done; one left running past a limit is abandoned, and the next call gets a new thread. The
call thread ends with its worker. A call is interrupted (Call.interrupt) when its job should stop
and its handler is not listening: JobStopped raised in its thread, or its asyncio task cancelled. A heartbeat waiting for a plane that is away holds back the next
ones of every job in the process: they go to that plane too, as a rule, and it is away for them.
"""

import contextvars
import queue
import threading
import time
from typing import Any, Callable, Dict, List, Optional

from .errors import Forbidden, InvocationCancelled, Unauthorized


class Beats:
    """Sends each watched job's heartbeat every `every` seconds from one daemon thread."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._due: Dict[Any, List[Any]] = {}  # job -> [next due (monotonic), every, beat]
        self._thread: Optional[threading.Thread] = None

    def watch(self, job: Any, every: float, beat: Callable[[], bool]) -> None:
        """Beats `job` every `every` seconds until `forget(job)` or until `beat` answers False."""
        with self._lock:
            self._due[job] = [time.monotonic() + every, every, beat]
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True, name="lakeshore-heartbeats")
                self._thread.start()
            self._lock.notify()

    def forget(self, job: Any) -> None:
        with self._lock:
            self._due.pop(job, None)

    def _run(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                due = [(job, entry) for job, entry in self._due.items() if entry[0] <= now]
                for _, entry in due:
                    entry[0] = now + entry[1]
                if not due:
                    nxt = min((entry[0] for entry in self._due.values()), default=None)
                    self._lock.wait(None if nxt is None else max(0.0, nxt - now))
                    continue
            # Outside the lock: a heartbeat waits for the plane, and jobs come and go meanwhile.
            for job, entry in due:
                try:
                    more = entry[2]()
                except Exception:
                    more = True
                if not more:
                    self.forget(job)


BEATS = Beats()


class Cancels:
    """Hears a running job's cancel as it happens, not at its next heartbeat (a third of the lease,
    10 s by default): for each plane and queue with jobs that have run `after` seconds, a daemon
    thread waits on their results (`results`, answered as soon as one of them ends) and tells a job
    the answer says was cancelled. A job that ends sooner costs nothing. A plane or token that does
    not take the wait leaves the heartbeats to tell, as before."""

    def __init__(self, after: float = 1.0, wait: float = 2.0) -> None:
        self._lock = threading.Condition()
        self._after, self._wait = after, wait
        self._queues: Dict[Any, Dict[Any, Any]] = {}  # (id(plane), queue) -> {job: [started (monotonic), job id, told]}
        self._planes: Dict[Any, Any] = {}  # id(plane) -> plane, while it has jobs watched
        self._refused: "set[int]" = set()  # planes whose token may not wait on results

    def watch(self, plane: Any, queue: str, job: Any, job_id: str, cancelled: Callable[[], None]) -> None:
        if not hasattr(plane, "results"):
            return
        key = (id(plane), queue)
        with self._lock:
            if id(plane) in self._refused:
                return
            jobs = self._queues.get(key)
            if jobs is None:
                jobs = self._queues[key] = {}
                self._planes[id(plane)] = plane
                threading.Thread(target=self._run, args=(key,), daemon=True, name="lakeshore-cancels").start()
            jobs[job] = [time.monotonic(), job_id, cancelled]
            self._lock.notify_all()

    def forget(self, plane: Any, queue: str, job: Any) -> None:
        with self._lock:
            jobs = self._queues.get((id(plane), queue))
            if jobs is not None:
                jobs.pop(job, None)

    def _run(self, key: Any) -> None:
        plane = self._planes[key[0]]
        while True:
            with self._lock:
                jobs = self._queues[key]
                if not jobs:  # none left: the thread ends, and the next job starts another
                    del self._queues[key]
                    if not any(k[0] == key[0] for k in self._queues):
                        self._planes.pop(key[0], None)
                    return
                now = time.monotonic()
                due = {entry[1]: job for job, entry in jobs.items() if now - entry[0] >= self._after}
                if not due:
                    self._lock.wait(max(0.0, min(entry[0] for entry in jobs.values()) + self._after - now))
                    continue
            try:
                ended = plane.results(key[1], list(due), timeout=self._wait, poll=0.2)
            except (Forbidden, Unauthorized):
                with self._lock:
                    self._refused.add(key[0])  # the heartbeats tell, as before
                    self._queues.pop(key, None)
                    self._planes.pop(key[0], None)
                return
            except Exception:
                time.sleep(1.0)  # the plane away: ask again
                continue
            for e in ended:
                job = due.get(e.get("id"))
                with self._lock:
                    entry = self._queues[key].pop(job, None) if job is not None else None
                # Ended otherwise while it runs here: its lease was lost, and the heartbeat tells.
                if entry is not None and isinstance(e.get("error"), InvocationCancelled):
                    entry[2]()


CANCELS = Cancels()


class TimeLimitExceeded(Exception):
    """A job ran past its envelope's time_limit_ms."""


class JobStopped(BaseException):
    """Raised inside a handler that never read current_job().stop, once its job should stop: it was
    cancelled, its lease was lost, or it ran past its time limit (current_job().stop_reason says
    which). A BaseException, as KeyboardInterrupt is, so that `except Exception` in the handler
    does not swallow it; its `finally` blocks and context managers run. An async handler's task is
    cancelled instead (asyncio.CancelledError), as asyncio code expects."""


try:  # CPython's way to raise in another thread (dramatiq's time limits and Ray's cancel use it)
    import ctypes

    _set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
    _set_async_exc.argtypes = [ctypes.c_ulong, ctypes.py_object]
    _NO_EXC: Any = ctypes.py_object()  # NULL: clears what is pending

    def _raise_in(ident: int, exc: Any) -> bool:
        return _set_async_exc(ident, exc) == 1
except (ImportError, AttributeError):  # no ctypes, or not CPython: handlers are only told (stop)
    _NO_EXC = None

    def _raise_in(ident: int, exc: Any) -> bool:
        return False


class Call:
    """One call on a Runner's thread, which `interrupt()` stops: JobStopped raised in that thread,
    or the asyncio task it registered (`on_interrupt`) cancelled. Only while the call runs: the
    interruption never reaches the thread's next call, nor the Runner's own code."""

    def __init__(self, ctx: contextvars.Context, call: Callable[[], Any]) -> None:
        self.ctx, self.call = ctx, call
        self.box: Dict[str, Any] = {}
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._thread: Optional[int] = None  # while it runs
        self._cancel_task: Optional[Callable[[], None]] = None
        self._stopped = False
        self._raised = False  # JobStopped sent to the thread (it may still be pending)

    def interrupt(self) -> None:
        with self._lock:
            if self._stopped or self.done.is_set():
                return
            self._stopped = True
            if self._thread is None:
                return  # not begun: it will not begin
            if self._cancel_task is not None:
                self._cancel_task()
            else:
                self._raised = _raise_in(self._thread, JobStopped)

    def _run(self, me: int) -> None:
        out: Optional[tuple] = None
        try:
            try:
                with self._lock:
                    if self._stopped:
                        raise JobStopped()
                    self._thread = me
                _running.call = self
                out = ("value", self.ctx.run(self.call))
            except BaseException as e:  # re-raised in the worker's thread, StopIteration included
                out = ("error", e)
        except JobStopped as e:  # the interruption landed as the call ended
            out = out or ("error", e)
        while True:  # nothing of this call's interruption may be left pending for the next call
            try:
                self._settle(me)
                break
            except JobStopped:
                continue
        self.box[out[0] if out else "error"] = out[1] if out else JobStopped()
        self.done.set()

    def _settle(self, me: int) -> None:
        _running.call = None
        with self._lock:
            self._thread = None
            pending = self._raised
            self._raised = False
        if pending and _NO_EXC is not None:
            _set_async_exc(me, _NO_EXC)


_running = threading.local()  # the Call a Runner's thread runs now


def on_interrupt(cancel: Callable[[], None]) -> None:
    """Called from inside a running call (an async handler's event loop): an interruption runs
    `cancel` (thread-safe: it cancels the call's task) rather than raising in the thread."""
    call = getattr(_running, "call", None)
    if call is None:
        return
    with call._lock:
        call._cancel_task = cancel
        late = call._stopped and not call._raised
    if late:
        cancel()


class Runner:
    """Runs calls one at a time on a reused daemon thread; a call past its deadline is left running
    on that thread, which then ends, and the next call gets a thread of its own."""

    def __init__(self) -> None:
        self._calls: "Optional[queue.SimpleQueue[Any]]" = None

    def run(self, deadline: Optional[float], limit: str, call: Callable[[], Any],
            started: Optional[Callable[[Call], None]] = None) -> Any:
        """`call` in a copy of the caller's contextvars context (the running job), on the Runner's
        thread, raising TimeLimitExceeded once `deadline` (monotonic; None: none) passes.
        `started(c)` is given the Call first, for its interruption."""
        if self._calls is None:
            self._calls = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(self._calls,), daemon=True, name="lakeshore-job").start()
        c = Call(contextvars.copy_context(), call)
        if started is not None:
            started(c)
        self._calls.put(c)
        if not c.done.wait(None if deadline is None else max(0.0, deadline - time.monotonic())):
            self.close()  # abandoned: the thread ends once the call does
            raise TimeLimitExceeded("the job ran past its time limit of %s" % limit)
        if "error" in c.box:
            raise c.box["error"]
        return c.box.get("value")

    def close(self) -> None:
        """Ends the thread once its call (if any) is done; a later call starts a new one."""
        if self._calls is not None:
            self._calls.put(None)
            self._calls = None


def _serve(calls: "queue.SimpleQueue[Any]") -> None:
    me = threading.get_ident()
    while True:
        try:
            c = calls.get()
        except JobStopped:
            continue  # cannot be (Call._settle clears it): a last guard for the thread
        if c is None:
            return
        c._run(me)
