"""run_worker: claims from a pool and runs the named functions of a registry.

The loop (_Loop) claims and hands each job to its attempt (attempt.py), which runs the handler
(job.py); a process's loops run together in threads (threads.py)."""
import os
import socket
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Union

from .attempt import _run_one
from .context import JobContext, _LogShipper, current_job, set_origin_for
from .errors import FencingConflict, NotFound
from .job import _runners
from .job_clock import JobStopped, TimeLimitExceeded
from .plane import is_local
from .resolve import Resolver
from .threads import _Either, _holding, _stop_event, together
from .version import __version__

__all__ = ["JobContext", "JobStopped", "TimeLimitExceeded", "current_job", "run_worker", "set_origin_for"]


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
    del given["concurrency"]
    return _Loop(**given).serve()


class _Loop:
    """One worker loop on one thread: claims a job (or takes the one an ack handed over), runs its
    attempt, and again, until stopped; says who it is along its claims, and that it stopped."""

    def __init__(self, q: Any, queue: Optional[str], registry: Optional[Dict[str, Callable[..., Any]]], *,
                 root: "Optional[Union[str, os.PathLike[str]]]", once: bool, poll: float, retries: Optional[int], stop: Any,
                 allow_pickled: Optional[bool], runtime_policy: str, once_wait: float, worker_id: Optional[str], wait: float,
                 lease: float, on_done: Optional[Callable[[Dict[str, Any], Dict[str, Any]], Any]], code: Optional[str],
                 code_home: Optional[str], time_limit_ms: Optional[int], pools: Optional[List[str]], slots: Optional[int]) -> None:
        from .queue import SyncQueue
        if isinstance(q, SyncQueue):
            if queue is not None:
                raise TypeError("run_worker(q, ...): the SyncQueue names the queue")
            dispatch, queue = q.dispatch, q.name
        else:
            dispatch = q
            if not isinstance(queue, str):
                raise TypeError("run_worker needs a SyncQueue, or a dispatch and a queue name")
        self.dispatch, self.queue = dispatch, queue
        self.resolve = self._resolver(registry, root, code, code_home, allow_pickled, runtime_policy)
        self.once, self.once_wait, self.retries, self.lease, self.on_done = once, once_wait, retries, lease, on_done
        self.worker_id = worker_id or _worker_id()
        told = list(pools) if pools else [queue]
        self.info = {"queues": told, "host": socket.gethostname(), "pid": os.getpid(), "version": __version__,
                     "concurrency": slots or len(told)}
        self.info_at: Optional[float] = None  # when it last said who it is
        self.done = threading.Event()
        self.stop = _stop_event(stop, poll, self.done)
        self.logs = _LogShipper(dispatch, self.worker_id)
        self.claiming: Optional[str] = None  # the claim waiting now, for the stop watcher to call off
        self.can_cancel = hasattr(dispatch, "cancel_claim")
        # A plane that cannot call a waiting claim off (the local one) is asked in short waits
        # instead, so a stop is heard within one of them.
        self.step = wait if self.can_cancel else min(wait, _LOCAL_WAIT_STEP)
        self.own_limit = DEFAULT_TIME_LIMIT_MS if time_limit_ms is None else (time_limit_ms or None)
        self.own_whose = _DEFAULT_LIMIT_SAID if time_limit_ms is None else "its worker's"
        self.queue_limit: Optional[int] = None
        self.queue_limit_at: Optional[float] = None
        # A job's ack carries the claim of the next (one request a job, as Node's worker), unless
        # the worker is to stop, runs once, or has something to say of itself, which only a claim carries.
        self.handed: List[Any] = []
        self.ack = self._ack_and_next if not once and hasattr(dispatch, "ack_and_claim") else None

    def _resolver(self, registry: Any, root: Any, code: Optional[str], code_home: Optional[str], allow_pickled: Optional[bool],
                  runtime_policy: str) -> Resolver:
        local = is_local(self.dispatch)
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
        return Resolver(registry, root, allow_import=True, confined=confined,
                        allow_pickled=local if allow_pickled is None else allow_pickled, runtime_policy=runtime_policy,
                        mounts=mounts_for(self.dispatch, code_home) if code == "mount" else None)

    def serve(self) -> int:
        """Runs jobs until stopped (or one, with `once`); answers how many it ran."""
        if self.can_cancel:
            threading.Thread(target=self._call_off, daemon=True).start()
        executed = 0
        try:
            once_until = time.monotonic() + self.once_wait
            while not self.stop.is_set():
                claim_id = None
                if self.handed:
                    c = self.handed.pop(0)
                else:
                    claim_id = uuid.uuid4().hex
                    c = self._claim(claim_id, max(0.0, min(once_until - time.monotonic(), self.step)) if self.once else self.step)
                if c is None:
                    if self.once and time.monotonic() >= once_until:
                        return 0
                    continue
                if self.stop.is_set():
                    self._untouched(c, claim_id)
                    break
                executed += 1
                self._run(c)
                if self.once:
                    break
        finally:
            self._close()
        return executed

    def _claim(self, claim_id: str, wait: float) -> Any:
        """One claim, waiting up to `wait` seconds; None when none came."""
        self.claiming = claim_id
        try:
            return self.dispatch.claim(self.queue, self.worker_id, wait=wait, lease=self.lease, worker=self._say_who(),
                                       **({"claim_id": claim_id} if self.can_cancel else {}))
        finally:
            self.claiming = None

    def _untouched(self, c: Any, claim_id: Optional[str]) -> None:
        """Stopped while the answer was on its way: the job back untouched (a claim called off
        moments after its answer puts its job back without charging an attempt). The stop watcher
        may have called it off first: the job is back already, perhaps another worker's by now, and
        finding it so is no error."""
        if not (self.can_cancel and claim_id and self.dispatch.cancel_claim(self.queue, self.worker_id, claim_id)):
            _give_back(self.dispatch, self.queue, self.worker_id, [c])

    def _run(self, c: Any) -> None:
        """One claimed job's attempt, under its queue's time limit, else this worker's."""
        q_limit = self._limit_of_queue()
        _holding[threading.get_ident()] = (self.dispatch, self.worker_id, c)  # for an interrupt's second stop (together)
        try:
            _run_one(self.dispatch, c, self.worker_id, self.resolve, self.retries, max(0.2, self.lease / 3), self.on_done, self.logs,
                     q_limit or self.own_limit, "its queue's" if q_limit else self.own_whose, self.ack)
        finally:
            _holding.pop(threading.get_ident(), None)

    def _say_who(self) -> Optional[Dict[str, Any]]:
        """What the worker says of itself: with its first claim, then every _INFO_EVERY_S."""
        now = time.monotonic()
        if self.info_at is not None and now - self.info_at < _INFO_EVERY_S:
            return None
        self.info_at = now
        return self.info

    def _call_off(self) -> None:
        """The stop watcher: when `stop` is set, the waiting claim is called off on the plane, so it takes no job."""
        while not (self.stop.wait(0.1) or self.done.is_set()):
            pass
        claim_id = self.claiming
        if claim_id and not self.done.is_set():
            try:
                self.dispatch.cancel_claim(self.queue, self.worker_id, claim_id)
            except Exception:
                pass

    def _limit_of_queue(self) -> Optional[int]:
        """The queue's time_limit_ms setting, read again every _QUEUE_SETTINGS_S (kept when the plane is away)."""
        if self.queue_limit_at is None or time.monotonic() - self.queue_limit_at >= _QUEUE_SETTINGS_S:
            self.queue_limit_at = time.monotonic()
            try:
                self.queue_limit = (self.dispatch.queue_info(self.queue).get("settings") or {}).get("time_limit_ms")
            except Exception:
                pass
        return self.queue_limit

    def _ack_and_next(self, c: Any, body: bytes) -> None:
        """A job's ack, carrying the claim of the next when the loop goes on and has nothing to say."""
        if self.stop.is_set() or (self.info_at is not None and time.monotonic() - self.info_at >= _INFO_EVERY_S):
            self.dispatch.ack(c.id, self.worker_id, result=body, attempt=c.attempt)
            return
        errors, got = self.dispatch.ack_and_claim(self.queue, self.worker_id, [{"id": c.id, "attempt": c.attempt, "result": body}], 1,
                                                  lease=self.lease)
        self.handed.extend(got)
        if errors[0] is not None:
            raise errors[0]

    def _close(self) -> None:
        """The loop's end: jobs handed over and not started go back, and the worker says it stopped."""
        try:
            _give_back(self.dispatch, self.queue, self.worker_id, self.handed)  # handed over with an ack as the worker stopped
        except Exception:
            pass
        self.done.set()
        self.logs.flush()
        if self.info_at is not None:
            # Stopping, said (best effort, one try): the feed tells `stopped`, not `lost` a minute later.
            try:
                self.dispatch.worker_stopped(self.queue, self.worker_id)
            except Exception:
                pass
        # The thread that ran this worker's calls ends with it (a program may start workers in threads of its own).
        runner = getattr(_runners, "runner", None)
        if runner is not None:
            runner.close()


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
