"""run_worker: claims from a pool and runs the named functions of a registry."""
import asyncio
import inspect
import json
import logging
import os
import socket
import sys
import threading
import time
import traceback
import uuid
from typing import Any, Callable, Dict, List, Optional, Union

from .envelope import decode_envelope, json_bytes
from .errors import FencingConflict, NotFound, PayloadTooLarge
from .chunks import ChunkWriter
from .frames import BEGIN, CHUNK, END, ERROR, VALUE, encode_frame
from .plane import is_local
from .resolve import Resolver, Unrunnable
from .tracing import run_span
from .context import JobContext, _current, _LogShipper, current_job, set_origin_for
from .job_clock import BEATS, CANCELS, Call, JobStopped, Runner, TimeLimitExceeded, on_interrupt
from .version import __version__

__all__ = ["JobContext", "JobStopped", "TimeLimitExceeded", "current_job", "run_worker", "set_origin_for"]

def _json(v: Any) -> bytes:
    return json.dumps(v, separators=(",", ":")).encode("utf-8")


_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _stack_of(e: BaseException) -> str:
    """A job's traceback from its handler's frame on: the worker's own frames that called it (the
    attempt, the time limit's thread) say nothing of the failure. An error the worker raised
    itself (no handler frame in it) keeps them all."""
    tb = e.__traceback__
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_HERE):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(e), e, tb if tb is not None else e.__traceback__))


def _escaped(e: BaseException) -> None:
    """What a handler raised that is no Exception ends its job, never the worker: sys.exit (or
    argparse refusing its arguments) with status 0 (or none) is a success with no result; another
    status, or another BaseException (an async handler's asyncio.CancelledError, say), fails the
    job as a handler's error would, of its own type."""
    if isinstance(e, SystemExit) and (e.code is None or e.code == 0):
        return None
    raise _Escaped(e) from None


class _Escaped(Exception):
    """A handler's BaseException, raised on as its job's failure."""

    def __init__(self, raised: BaseException) -> None:
        said = ("the handler exited: sys.exit(%r)" % (raised.code,) if isinstance(raised, SystemExit)
                else str(raised) or "the handler raised %s" % type(raised).__name__)
        super().__init__(said)
        self.raised = raised


def _as_json(v: Any, what: str) -> bytes:
    """A handler's result or yielded value as JSON bytes, as a Node worker writes it (a NaN loss is
    null, so every reader parses it); a value JSON cannot write is the handler's TypeError."""
    try:
        return json_bytes(v)
    except (TypeError, ValueError) as e:
        err = TypeError("the handler's %s is not JSON: %s" % (what, e))
        # Not retried: the handler ran, perhaps for hours, and answered what no reader can take; it would again.
        err._lakeshore_once = True  # type: ignore[attr-defined]
        raise err from None


def _awaited(v: Any) -> Any:
    """A handler's answer, with a coroutine (an `async def` handler's) run to its end on an event
    loop of its own; anything else as it is."""
    if inspect.isawaitable(v) and not inspect.isasyncgen(v):
        return asyncio.run(_interruptible(v))
    return v


async def _interruptible(v: Any) -> Any:
    """Awaits `v` in a task that the job's interruption cancels (job_clock.on_interrupt)."""
    task, loop = asyncio.current_task(), asyncio.get_running_loop()
    on_interrupt(lambda: loop.call_soon_threadsafe(task.cancel))  # type: ignore[union-attr]
    return await v


class _Steps:
    """A generator's values one at a time: a plain one's by next(); an async one's on an event loop
    kept for the job, so the generator's awaits and its values run on one loop."""

    def __init__(self, gen: Any) -> None:
        self.gen = gen
        self.loop = asyncio.new_event_loop() if inspect.isasyncgen(gen) else None

    def next(self) -> Any:
        if self.loop is None:
            return next(self.gen)
        return self.loop.run_until_complete(_interruptible(self.gen.__anext__()))

    def close(self) -> None:
        """Closes the generator (its finally blocks run) and the loop; a step left running past the
        job's time limit keeps them, as Python cannot stop it."""
        try:
            if self.loop is None:
                self.gen.close()
            else:
                self.loop.run_until_complete(self.gen.aclose())
                self.loop.close()
        except (RuntimeError, ValueError):
            pass


class _Job:
    """One claimed attempt: numbered frames, its heartbeats (job_clock.BEATS), a cancel flag."""

    def __init__(self, d: Any, claimed: Any, worker_id: str, heartbeat_s: float, ctx: Optional[JobContext] = None):
        self.d, self.c, self.worker_id, self.ctx = d, claimed, worker_id, ctx
        #: Who writes its frames: named on each call, not left to the client's memory of its claims,
        #: which another thread's claim of the job's next attempt may have replaced.
        self.holder = {"worker_id": worker_id, "attempt": claimed.attempt}
        self.seq: Optional[int] = None
        self.cancelled = threading.Event()
        self.lost = threading.Event()
        self.call: Optional[Call] = None  # the handler's call running now, for its interruption
        self._frames = threading.Lock()  # one frame at a time, numbered in order: the handler's and its writes'
        #: current_job().write(): CHUNK frames, sent by a thread of their own.
        self.chunks = ChunkWriter(lambda body: self._append(CHUNK, body))
        BEATS.watch(self, heartbeat_s, self._heartbeat)
        CANCELS.watch(d, claimed.queue, self, claimed.id, self._cancelled)

    def append(self, kind: int, body: bytes, meta: Optional[Dict[str, Any]] = None, final: bool = False) -> None:
        """A frame after everything the handler wrote before it."""
        self.chunks.flush()
        self._append(kind, body, meta, final)

    def _append(self, kind: int, body: bytes, meta: Optional[Dict[str, Any]] = None, final: bool = False) -> None:
        with self._frames:
            if self.seq is None:
                self.seq = self.d.journal_append(self.c.id, None, encode_frame(kind, 0, body, meta), final=final, **self.holder)
            else:
                self.seq += 1
                self.d.journal_append(self.c.id, self.seq, encode_frame(kind, self.seq, body, meta), final=final, **self.holder)

    def _heartbeat(self) -> bool:
        """One heartbeat; False once there is no need of more (cancelled, or no longer this worker's)."""
        try:
            if self.d.heartbeat(self.c.id, self.worker_id, attempt=self.c.attempt):
                self.cancelled.set()
                self.abort(_CANCELLED)
                return False
        except (FencingConflict, NotFound):
            self.lost.set()
            self.abort(_LOST)
            return False
        except Exception:
            pass  # the plane away: the next one tries again
        return True

    def _cancelled(self) -> None:
        """Its cancel, heard from the wait on its result (job_clock.CANCELS) before a heartbeat told it."""
        self.cancelled.set()
        self.abort(_CANCELLED)

    def abort(self, reason: str) -> None:
        """Tells the handler to stop (current_job().stop), saying why, and interrupts it when it
        never read that (JobStopped, or its task cancelled)."""
        if self.ctx is not None and not self.ctx._abort(reason):
            return
        call = self.call
        if call is not None:
            call.interrupt()

    def stopped(self) -> bool:
        """Cancelled, or no longer this worker's: the attempt writes nothing more."""
        return self.cancelled.is_set() or self.lost.is_set()

    def finish(self) -> None:
        self.chunks.close()
        BEATS.forget(self)
        CANCELS.forget(self.d, self.c.queue, self)


def _why_refused(d: Any, c: Any) -> str:
    """Why the plane refused an attempt's write (a 409 or 404): cancelled, or no longer its."""
    try:
        if (d.get(c.id) or {}).get("state") == "cancelled":
            return _CANCELLED
    except Exception:
        pass
    return _LOST


#: Each attempt's outcome, as Node's worker says it: "ID: succeeded" (info), and why it failed, was
#: retried or stopped (warning). `python -m lakeshore.daemon` (and so `lakeshore worker start`)
#: writes them to stderr; a program sees them as its logging is set up to.
_log = logging.getLogger("lakeshore.worker")
_log.addHandler(logging.NullHandler())  # a library's way: silent unless the program (or the daemon) listens, as Node's runWorker


def _ended(c: Any, outcome: str, why: Optional[str] = None) -> None:
    if why is not None:
        _log.warning("job %s attempt %d%s", c.id, c.attempt, why)
    _log.info("%s: %s", c.id, outcome)


def _stopped_as(d: Any, c: Any, job: "_Job") -> None:
    """Says an attempt that ended without its outcome: cancelled, or no longer this worker's."""
    why = job.ctx.stop_reason if job.ctx is not None and job.ctx.stop_reason else None
    if job.cancelled.is_set() or why == _CANCELLED:
        _ended(c, "cancelled", ": cancelled: %s; stopped" % _CANCELLED)
    elif job.lost.is_set() or why == _LOST:
        _ended(c, "lost", ": lost: %s; stopped" % _LOST)
    else:
        cancelled = _why_refused(d, c) == _CANCELLED
        _ended(c, "cancelled" if cancelled else "lost",
               ": cancelled; stopped" if cancelled else ": lost: its lease ran out or the job went to another worker; stopped")


_CANCELLED = "the invocation was cancelled"
_LOST = "its lease was lost (it ran out, or the job went to another worker)"


# Each worker thread's runner of job calls under their time limits (job_clock.Runner).
_runners = threading.local()


def _within(job: _Job, deadline: Optional[float], limit: str, call: Callable[[], Any]) -> Any:
    """Runs `call` (in this job's context) on this worker thread's runner, raising
    TimeLimitExceeded once `deadline` (monotonic) passes. The job's abort interrupts it (_Job.abort);
    a call that still runs past the limit (Python cannot stop a thread inside a C call) is left
    running in a daemon thread, its outcome discarded, and the job fails."""
    runner = getattr(_runners, "runner", None)
    if runner is None:
        runner = _runners.runner = Runner()

    def started(c: Call) -> None:
        job.call = c
    return runner.run(deadline, limit, call, started)


def run_worker(q: Any, queue: Optional[str] = None, registry: Optional[Dict[str, Callable[..., Any]]] = None, *,
               root: "Optional[Union[str, os.PathLike[str]]]" = None, once: bool = False, poll: float = 0.05, retries: Optional[int] = 1,
               stop: "Optional[Union[threading.Event, Callable[[], bool]]]" = None, allow_pickled: Optional[bool] = None, runtime_policy: str = "minor",
               once_wait: float = 2.0, worker_id: Optional[str] = None, wait: float = 20.0, lease: float = 30.0,
               on_done: Optional[Callable[[Dict[str, Any], Dict[str, Any]], Any]] = None, code: Optional[str] = None,
               code_home: Optional[str] = None, time_limit_ms: Optional[int] = None, pools: Optional[List[str]] = None,
               slots: Optional[int] = None, concurrency: int = 1) -> int:
    """Serves a queue until `stop` says so; returns the number of jobs run. `stop` is a
    threading.Event or a callable answering True to stop (asked every `poll` seconds); either way
    the worker stops within a second, also while it waits on an empty queue.

    `concurrency` runs that many jobs at once, each in a thread of its own under one worker id, as
    Node's `runWorker(queues, { concurrency })` and `lakeshore worker start --concurrency` do: the
    plane lists one worker with that many slots. One thread failing (a refused token, a plane
    given up on) stops the others, and its error is raised. Interrupted (KeyboardInterrupt, Ctrl-C)
    at any concurrency, it claims no more and finishes the jobs it runs, as on `stop`, then raises
    the interrupt; interrupted again meanwhile, it puts those jobs back in their queue at once
    (a nack with retry, as their lease's end would, error type `Interrupted`) and raises.

    The contract's form is `run_worker(q, root=..., registry=...)` with `q` a SyncQueue; the
    older `run_worker(dispatch, "queue", registry)` still works. With `once` it runs at most one
    job: on an empty queue it waits `once_wait` seconds for one, then returns 0. When `stop` is
    set, the claim waiting on the plane is called off (cancel_claim): it takes no job. `poll` is
    accepted for the contract's signature: claims wait on the plane, which wakes them.

    Functions resolve from the registry, then `module:qualname` imported under `root` (on an HTTP
    plane with no root: the current directory, confined to the modules found there); a by-value (pickled) function runs only where
    `allow_pickled` allows (default: on a local plane only) and its runtime stamp passes
    `runtime_policy` (resolve.py). With `code="mount"`, a job carrying the producer's pushed tree
    (docs/code-mount.md) runs its module from that tree, fetched and checked once per stamp under
    `code_home` ($LAKESHORE_HOME/code); without it such a job is refused. A job this worker cannot
    run fails at once.

    A plain function's JSON result is acked. A generator streams one VALUE frame per yield, then
    END. What a handler raises ends its job, never the worker: its SystemExit (sys.exit, argparse
    refusing its arguments) of status 0 (or none) succeeds with no result; any other status, or
    another BaseException (asyncio.CancelledError), is a failure of its type.
    A failure writes an ERROR frame and nacks: retried while its attempt is at most `retries`
    (default 1, as the contract: 2 attempts) and the envelope's `max_retries`, a budget the nack
    carries for the plane where neither the job nor its queue sets one; a job's own max_attempts
    or its queue's still rules where set (None: the plane's budget alone, else 3). The job's lease
    is heartbeaten while it runs; a job cancelled meanwhile stops streaming. An envelope's
    `time_limit_ms` is kept, else its queue's `time_limit_ms` setting (read at the start and every
    30 s), else this worker's `time_limit_ms` (default 600 s, the contract's; 0: none): past it the job fails with TimeLimitExceeded (retried within the
    budget like any failure); Python cannot stop a thread, so the handler is left to finish in a
    daemon thread and what it does then is discarded. A job runs in an opentelemetry CONSUMER
    span when that is installed (tracing.py), and current_job() is the job it runs.

    The worker says who it is along its claims (docs/contract.md, "Workers"): its queues (`pools`,
    every pool its process serves together; default the one), host, pid, version and `slots` (the
    jobs its process runs at once; default one a pool), with
    its first claim and every 30 s after; as it returns it says it stopped, so `lakeshore
    workers` and the feed tell `stopped` rather than, a minute later, `lost`.

    `on_done(job, outcome)` sees each attempt's outcome: `job` is `{"id", "queue", "attempt",
    "fn", "origin"}`, `outcome` `{"state": "succeeded", "result"}` or `{"state": "failed",
    "error"}`. A failure is told as its handler ends, and on_done may return "handled": the job
    fails without a retry, the application having recorded the failure as a fact instead of
    retrying a side effect. A success is told once the plane has taken the ack; a result the plane
    refuses is told as the failure it becomes (PayloadTooLarge), a lost ack not at all
    (docs/contract.md, "Traces and the done hook")."""
    given = dict(locals())  # the arguments, first: the threads of `concurrency` run with them
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ValueError("concurrency must be a whole number of at least 1, got %r" % (concurrency,))
    if (concurrency > 1 and not once) or threading.current_thread() is threading.main_thread():
        # On the main thread the loop runs in a thread of its own too, so an interrupt (Ctrl-C)
        # lands in the wait for it (together) and stops the worker as a `stop` does.
        return _in_threads(given, 1 if once else concurrency)
    from .queue import SyncQueue
    if isinstance(q, SyncQueue):
        if queue is not None:
            raise TypeError("run_worker(q, ...): the SyncQueue names the queue")
        dispatch, queue = q.dispatch, q.name
    else:
        dispatch = q
        if not isinstance(queue, str):
            raise TypeError("run_worker needs a SyncQueue, or a dispatch and a queue name")
    local = is_local(dispatch)
    if root is not None:
        root = os.fspath(root)  # a pathlib.Path as a str
    if code not in (None, "off", "mount"):
        raise ValueError("code must be 'mount' or 'off', got %r" % code)
    from .mount import mounts_for
    # No root on an HTTP plane: the directory the worker started in, as the reference's default,
    # confined to the modules found there (resolve.py).
    confined = root is None and not local
    if confined:
        root = os.getcwd()
    resolve = Resolver(registry, root, allow_import=True, confined=confined,
                       allow_pickled=local if allow_pickled is None else allow_pickled, runtime_policy=runtime_policy,
                       mounts=mounts_for(dispatch, code_home) if code == "mount" else None)
    worker_id = worker_id or _worker_id()
    told = list(pools) if pools else [queue]
    info = {"queues": told, "host": socket.gethostname(), "pid": os.getpid(), "version": __version__, "concurrency": slots or len(told)}
    info_at: List[Optional[float]] = [None]

    def say_who() -> Optional[Dict[str, Any]]:
        """What the worker says of itself: with its first claim, then every _INFO_EVERY_S."""
        now = time.monotonic()
        if info_at[0] is not None and now - info_at[0] < _INFO_EVERY_S:
            return None
        info_at[0] = now
        return info
    done = threading.Event()
    stop = _stop_event(stop, poll, done)
    logs = _LogShipper(dispatch, worker_id)
    executed = 0
    claiming: Dict[str, str] = {}  # the claim waiting now, by name, for the stop watcher to call off

    def call_off() -> None:
        # When `stop` is set, the waiting claim is called off on the plane: it takes no job.
        while not (stop.wait(0.1) or done.is_set()):
            pass
        claim_id = claiming.get("id")
        if claim_id and not done.is_set():
            try:
                dispatch.cancel_claim(queue, worker_id, claim_id)
            except Exception:
                pass

    can_cancel = hasattr(dispatch, "cancel_claim")
    if can_cancel:
        threading.Thread(target=call_off, daemon=True).start()
    # A plane that cannot call a waiting claim off (the local one) is asked in short waits instead,
    # so a stop is heard within one of them.
    step = wait if can_cancel else min(wait, _LOCAL_WAIT_STEP)
    own_limit = DEFAULT_TIME_LIMIT_MS if time_limit_ms is None else (time_limit_ms or None)
    own_whose = _DEFAULT_LIMIT_SAID if time_limit_ms is None else "its worker's"
    queue_limit: Dict[str, Any] = {"ms": None, "at": None}

    def limit_of_queue() -> Optional[int]:
        """The queue's time_limit_ms setting, read again every _QUEUE_SETTINGS_S (kept when the plane is away)."""
        if queue_limit["at"] is None or time.monotonic() - queue_limit["at"] >= _QUEUE_SETTINGS_S:
            queue_limit["at"] = time.monotonic()
            try:
                queue_limit["ms"] = (dispatch.queue_info(queue).get("settings") or {}).get("time_limit_ms")
            except Exception:
                pass
        return queue_limit["ms"]

    # A job's ack carries the claim of the next (one request a job, as Node's worker), unless the
    # worker is to stop, runs once, or has something to say of itself, which only a claim carries.
    handed: List[Any] = []

    def ack_and_next(c: Any, body: bytes) -> None:
        if stop.is_set() or (info_at[0] is not None and time.monotonic() - info_at[0] >= _INFO_EVERY_S):
            dispatch.ack(c.id, worker_id, result=body, attempt=c.attempt)
            return
        errors, got = dispatch.ack_and_claim(queue, worker_id, [{"id": c.id, "attempt": c.attempt, "result": body}], 1, lease=lease)
        handed.extend(got)
        if errors[0] is not None:
            raise errors[0]

    ack = ack_and_next if not once and hasattr(dispatch, "ack_and_claim") else None
    try:
        once_until = time.monotonic() + once_wait
        while not stop.is_set():
            claim_id = None
            if handed:
                c = handed.pop(0)
            else:
                claim_id = uuid.uuid4().hex
                claiming["id"] = claim_id
                this_wait = max(0.0, min(once_until - time.monotonic(), step)) if once else step
                c = dispatch.claim(queue, worker_id, wait=this_wait, lease=lease, worker=say_who(),
                                   **({"claim_id": claim_id} if can_cancel else {}))
                claiming.pop("id", None)
            if c is None:
                if once and time.monotonic() >= once_until:
                    return 0
                continue
            if stop.is_set():
                # Stopped while the answer was on its way: give the job back untouched (a claim
                # called off moments after its answer puts its job back without charging an attempt).
                # The stop watcher may have called it off first: the job is back already, perhaps
                # another worker's by now, and finding it so is no error.
                if not (can_cancel and claim_id and dispatch.cancel_claim(queue, worker_id, claim_id)):
                    _give_back(dispatch, queue, worker_id, [c])
                break
            executed += 1
            q_limit = limit_of_queue()
            _holding[threading.get_ident()] = (dispatch, worker_id, c)  # for an interrupt's second stop (together)
            try:
                _run_one(dispatch, c, worker_id, resolve, retries, max(0.2, lease / 3), on_done, logs, q_limit or own_limit,
                         "its queue's" if q_limit else own_whose, ack)
            finally:
                _holding.pop(threading.get_ident(), None)
            if once:
                break
    finally:
        try:
            _give_back(dispatch, queue, worker_id, handed)  # handed over with an ack as the worker stopped
        except Exception:
            pass
        done.set()
        logs.flush()
        if info_at[0] is not None:
            # Stopping, said (best effort, one try): the feed tells `stopped`, not `lost` a minute later.
            try:
                dispatch.worker_stopped(queue, worker_id)
            except Exception:
                pass
        # The thread that ran this worker's calls ends with it (a program may start workers in threads of its own).
        runner = getattr(_runners, "runner", None)
        if runner is not None:
            runner.close()
    return executed


#: The longest single wait of a claim on a plane that cannot call one off (s): how soon a stop is heard.
_LOCAL_WAIT_STEP = 0.5
#: A job's time limit when its envelope, its queue and its worker set none (ms): the contract's 600 s.
DEFAULT_TIME_LIMIT_MS = 600_000
#: Whose a job's limit is when it is that default, as a job past it is told (and how to set one).
_DEFAULT_LIMIT_SAID = ("the default (a job sets its own with time_limit_ms, a queue with its time_limit_ms setting, "
                       "a worker with --time-limit-ms; 0 is none)")
#: How often a worker says who it is again, along a claim (s), as the Node worker does.
_INFO_EVERY_S = 30.0
#: How often a worker reads its queue's settings again (its time limit), in seconds.
_QUEUE_SETTINGS_S = 30.0


def _give_back(dispatch: Any, queue: str, worker_id: str, jobs: List[Any]) -> None:
    """Jobs this worker claimed and never started, back to their queue uncharged (a nack would
    spend an attempt of a job that never ran); a plane without release takes a nack. A job found no
    longer this worker's is back already (its claim called off by the stop watcher first, say), and
    perhaps another worker's by now: no error."""
    if not jobs:
        return
    try:
        dispatch.release(queue, worker_id, [{"id": c.id, "attempt": c.attempt} for c in jobs])
        return
    except Exception:
        pass  # a plane without the verb (its route unknown: NotFound), or away: a nack then
    for c in jobs:
        try:
            dispatch.nack(c.id, worker_id, error="the worker stopped before starting it", retry=True, attempt=c.attempt)
        except (FencingConflict, NotFound):
            pass


def _worker_id() -> str:
    """A worker's id when it names none: its host and process, the same for each of its threads."""
    return "%s:%d:py" % (socket.gethostname(), os.getpid())


def _in_threads(given: Dict[str, Any], concurrency: int) -> int:
    """run_worker's `concurrency`: that many run_workers of one worker id, each in a thread."""
    user_stop = given["stop"]
    every = threading.Event()
    stop: Any = every
    if user_stop is not None:
        asked = _stop_event(user_stop, given["poll"], every)  # the caller's stop (a callable: asked by one thread)
        stop = _Either(every, asked)

        def bridge() -> None:  # wakes the loops' waits on `every` when the caller's stop is set
            while not (asked.wait(0.5) or every.is_set()):
                pass
            every.set()
        threading.Thread(target=bridge, daemon=True, name="lakeshore-stop-bridge").start()
    pools = given["pools"] or [given["queue"] if given["queue"] is not None else getattr(given["q"], "name", None)]
    one = dict(given, stop=stop, concurrency=1, slots=given["slots"] or concurrency * len(pools),
               worker_id=given["worker_id"] or _worker_id())
    try:
        return together([lambda: run_worker(**one)] * concurrency, every)
    finally:
        every.set()  # the bridge's end, however the loops ended


class _Either:
    """Set once either event is: the loops' stop, which also reads the caller's own event as it
    is now (a stop set as a claim's answer comes is heard before the job starts)."""

    def __init__(self, ours: threading.Event, theirs: threading.Event) -> None:
        self.ours, self.theirs = ours, theirs

    def is_set(self) -> bool:
        return self.ours.is_set() or self.theirs.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        self.ours.wait(timeout)  # set by the bridge as soon as theirs is
        return self.is_set()


#: The job each worker loop's thread runs now, by thread: (dispatch, worker id, claim).
_holding: Dict[int, Any] = {}

#: How long a second interrupt waits for the plane to take back the jobs it held (s).
_PUT_BACK_S = 5.0


def running() -> int:
    """How many jobs this process's worker loops run now."""
    return len(_holding)


def put_back(threads: Optional[List[threading.Thread]] = None, why: str = "interrupted again (KeyboardInterrupt)") -> int:
    """The jobs `threads` run (None: every worker loop's of this process), back in their queues
    now: a nack with retry each, as their leases' end would do (the attempt is charged: it ran),
    only sooner. Best effort, for at most _PUT_BACK_S: a plane that is away gets them back as their
    leases run out. The handlers, left running, find their jobs no longer theirs and write nothing
    more. Answers how many it had to put back."""
    held = list(_holding.values()) if threads is None else [_holding.get(t.ident) for t in threads if t.ident is not None]
    jobs = [h for h in held if h is not None]
    if not jobs:
        return 0
    error = {"type": "Interrupted", "message": "its worker was %s while running it: back to its queue without waiting for its end" % why}

    def nack_all() -> None:
        for dispatch, worker_id, c in jobs:
            try:
                dispatch.nack(c.id, worker_id, error=error, retry=True, attempt=c.attempt)
            except Exception:
                pass  # no longer this worker's (it ended, or was cancelled), or the plane is away
    t = threading.Thread(target=nack_all, daemon=True, name="lakeshore-put-back")
    t.start()
    t.join(_PUT_BACK_S)
    return len(jobs)


def together(loops: List[Callable[[], int]], stop: threading.Event, names: Optional[List[str]] = None) -> int:
    """Runs each worker loop in a daemon thread of its own and answers the jobs they ran, summed.
    One loop's failure sets `stop` (the others drain) and is raised once all have returned; an
    interrupt of the calling thread (KeyboardInterrupt) sets it too, waits for the jobs they run to
    end, and is raised; a second interrupt meanwhile puts those jobs back (put_back) and is raised."""
    ran: List[int] = []
    failed: List[BaseException] = []
    left = [len(loops)]
    counting = threading.Lock()
    ended = threading.Event()  # every loop has returned
    if not loops:
        ended.set()

    def loop(run: Callable[[], int]) -> None:
        try:
            ran.append(run())
        except BaseException as e:
            failed.append(e)
            stop.set()
        finally:
            with counting:
                left[0] -= 1
                if not left[0]:
                    ended.set()

    def wait() -> None:
        # Not Thread.join: a join that an interrupt cuts short can leave its thread marked ended
        # while it still runs (CPython 3.11's _wait_for_tstate_lock), and the wait would end early.
        while not ended.wait(0.5):
            pass

    threads = [threading.Thread(target=loop, args=(run,), name=(names[i] if names else "lakeshore-worker-%d" % i), daemon=True)
               for i, run in enumerate(loops)]
    for t in threads:
        t.start()
    try:
        wait()
    except KeyboardInterrupt:
        stop.set()
        busy = sum(1 for t in threads if t.ident in _holding)
        if busy:
            sys.stderr.write("lakeshore: interrupted; finishing the %s it runs before it stops (interrupt again to put %s back "
                             "in the queue now)\n" % ("job" if busy == 1 else "%d jobs" % busy, "it" if busy == 1 else "them"))
            sys.stderr.flush()
        try:
            wait()
        except KeyboardInterrupt:
            put_back(threads)
            raise
        raise
    if failed:
        raise failed[0]
    return sum(ran)


def _stop_event(stop: Any, poll: float, done: threading.Event) -> threading.Event:
    """`stop` as an Event: an Event as it is; a callable asked every `poll` seconds (at most 0.5)
    by a daemon thread, which sets the Event once it answers True (or raises)."""
    if stop is None:
        return threading.Event()
    if hasattr(stop, "is_set") and hasattr(stop, "wait"):
        return stop
    if not callable(stop):
        raise TypeError("stop must be a threading.Event or a callable answering True to stop, got %r" % (stop,))
    event = threading.Event()
    every = min(max(poll, 0.01), 0.5)

    def ask() -> None:
        while not done.wait(every):
            try:
                if stop():
                    break
            except Exception:
                break
        event.set()

    threading.Thread(target=ask, daemon=True, name="lakeshore-stop").start()
    return event


def _told(on_done: Any, c: Any, env: Dict[str, Any], outcome: Dict[str, Any]) -> Any:
    """Tells on_done a job's outcome; what it answers (or None when it raised)."""
    if on_done is None:
        return None
    try:
        return on_done({"id": c.id, "queue": c.queue, "attempt": c.attempt, "fn": env.get("fn"), "origin": env.get("origin")}, outcome)
    except Exception:
        return None


def _run_one(d: Any, c: Any, worker_id: str, resolve: Resolver, retries: Optional[int], heartbeat_s: float,
             on_done: Optional[Callable[[Dict[str, Any], Dict[str, Any]], Any]], logs: _LogShipper, limit_ms: Optional[int] = None,
             limit_whose: str = "its worker's", ack: Optional[Callable[[Any, bytes], None]] = None) -> None:
    env: Dict[str, Any] = {}
    try:
        env = decode_envelope(c.envelope)
    except Exception:
        pass  # _attempt fails it with the decoding error
    # The job runs in a CONSUMER span `run <fn>`, child of its submitter's (tracing.py).
    with run_span(env.get("fn") or "?", env.get("traceparent"), {"id": c.id, "queue": c.queue, "attempt": c.attempt}) as trace_id:
        token = _current.set(JobContext(c, env, trace_id, logs, resolve.root))
        try:
            _attempt(d, c, worker_id, resolve, retries, heartbeat_s, on_done, limit_ms, limit_whose, ack)
        finally:
            _current.reset(token)


def _attempt(d: Any, c: Any, worker_id: str, resolve: Resolver, retries: Optional[int], heartbeat_s: float,
             on_done: Optional[Callable[[Dict[str, Any], Dict[str, Any]], Any]], fallback_limit_ms: Optional[int] = None,
             fallback_whose: str = "its worker's", ack: Optional[Callable[[Any, bytes], None]] = None) -> None:
    ctx = _current.get()
    job = _Job(d, c, worker_id, heartbeat_s, ctx)
    if ctx is not None:
        ctx._chunks = job.chunks
    env: Dict[str, Any] = {}
    try:
        env = decode_envelope(c.envelope)
        fn = resolve(env)
        # The job's own limit, else its queue's, else the worker's (contract, "Time limits").
        own = env.get("time_limit_ms")
        mine = isinstance(own, (int, float)) and not isinstance(own, bool) and own > 0
        limit_ms = own if mine else fallback_limit_ms
        limit = "%d ms, %s" % (limit_ms or 0, "the job's own" if mine else fallback_whose)  # as a job past it is told
        deadline = time.monotonic() + limit_ms / 1000.0 if isinstance(limit_ms, (int, float)) and limit_ms > 0 else None
        # An `async def` handler runs to its end on an event loop of its own, in the job's thread.
        try:
            out = _within(job, deadline, limit, lambda: _awaited(fn(*env.get("args", []), **env.get("kwargs", {}))))
        except Exception:
            raise
        except BaseException as e:
            if job.stopped():
                _stopped_as(d, c, job)
                return  # interrupted (JobStopped, or its task cancelled): the attempt is over
            out = _escaped(e)  # sys.exit(0) ends it well; any other fails the job, not the worker
        result: Any = out
        # The result's bytes are made before anything says the job ended: a result JSON cannot
        # write fails the job here, as the handler's error, not after its stream ended.
        if inspect.isgenerator(out) or inspect.isasyncgen(out):
            steps = _Steps(out)
            try:
                job.append(BEGIN, b"", {"attempt": c.attempt})
                while True:
                    if job.stopped():
                        _stopped_as(d, c, job)
                        return
                    try:
                        value = _within(job, deadline, limit, steps.next)
                    except StopIteration as stop_it:
                        result = stop_it.value
                        break
                    except StopAsyncIteration:
                        result = None  # an async generator returns no value
                        break
                    except Exception:
                        raise
                    except BaseException as e:
                        if job.stopped():
                            _stopped_as(d, c, job)
                            return
                        result = _escaped(e)
                        break
                    job.append(VALUE, _as_json(value, "a value it yielded"))
            except (FencingConflict, NotFound):
                job.abort(_why_refused(d, c))  # said before the generator's finally blocks run
                raise
            finally:
                steps.close()
            body = _as_json(result, "result")
            job.append(END, b"", None, final=True)
        else:
            body = _as_json(result, "result")
        if job.stopped():
            _stopped_as(d, c, job)
            return
        job.chunks.flush()  # every chunk is in the journal before the ack
        try:
            if ack is not None:
                ack(c, body)
            else:
                d.ack(c.id, worker_id, result=body, attempt=c.attempt)
        except PayloadTooLarge as e:
            # A result larger than the plane takes: another attempt would run the handler again
            # (for hours, perhaps) to answer the same. Failed now, saying so; on_done hears the
            # failure the job has, not the success the handler returned.
            message = ("the handler's result is too large for the plane: %s (a large output belongs in storage of its own, "
                       "its address in the result)" % e)
            _told(on_done, c, env, {"state": "failed", "error": PayloadTooLarge(message)})
            d.nack(c.id, worker_id, retry=False, error={"type": "PayloadTooLarge", "message": message}, attempt=c.attempt)
            _ended(c, "failed", " failed: %s; not retried" % message)
            return
        # Told once the plane has the result, so what on_done hears is the job's state (a lost
        # ack, the job another attempt's now, is not heard at all).
        _told(on_done, c, env, {"state": "succeeded", "result": result})
        _ended(c, "succeeded")
    except (FencingConflict, NotFound):
        _stopped_as(d, c, job)
        return  # the lease was lost or the job cancelled: this attempt writes nothing more
    except Exception as e:
        if isinstance(e, TimeLimitExceeded):
            job.abort(str(e))  # the handler, left running in its thread, is told to stop
        caps = [r for r in (retries, env.get("max_retries")) if isinstance(r, int) and not isinstance(r, bool)]
        handled = _told(on_done, c, env, {"state": "failed", "error": e}) == "handled"
        # Would fail the same again: no handler to find, an answer JSON cannot write, a value larger than the plane takes.
        once = isinstance(e, (Unrunnable, PayloadTooLarge)) or getattr(e, "_lakeshore_once", False)
        # Counted in the job's current budget: an operator's retry starts it afresh, and a claim put
        # back uncharged took none of it (the attempt number counts both).
        retry = not handled and not once and all(c.budget_attempt <= r for r in caps)
        raised = e.raised if isinstance(e, _Escaped) else e  # said as the handler raised it
        error = {"message": str(e), "type": type(raised).__name__, "stack": _stack_of(raised)}
        failed_with = " failed: %s: %s" % (error["type"], error["message"])
        try:
            job.append(ERROR, _json(error), {"attempt": c.attempt}, final=not retry)
            # The worker's budget (retries + 1) rules where neither the job nor its queue sets one.
            state = d.nack(c.id, worker_id, error=error, retry=retry, attempt=c.attempt, **({"max_attempts": min(caps) + 1} if caps else {}))
        except (FencingConflict, NotFound):
            _ended(c, "lost", "%s; lost: no longer this worker's (cancelled, or its lease ran out)" % failed_with)
            return
        # Said once the plane has said where the job went.
        _ended(c, "failed" if state == "failed" else "retried",
               "%s; %s" % (failed_with, ("no attempts left" if retry else "not retried") if state == "failed" else "it will be retried (%s)" % state))
    finally:
        job.finish()
