"""run_worker: claims from a pool and runs the named functions of a registry."""
import inspect
import json
import os
import socket
import threading
import traceback
import uuid
from typing import Any, Callable, Dict, Optional

from .envelope import decode_envelope
from .errors import FencingConflict, NotFound
from .frames import BEGIN, END, ERROR, VALUE, encode_frame


def _json(v: Any) -> bytes:
    return json.dumps(v, separators=(",", ":")).encode("utf-8")


class _Job:
    """One claimed attempt: numbered frames, a heartbeat thread, a cancel flag."""

    def __init__(self, d: Any, claimed: Any, worker_id: str, heartbeat_s: float):
        self.d, self.c, self.worker_id = d, claimed, worker_id
        self.seq: Optional[int] = None
        self.cancelled = threading.Event()
        self.lost = threading.Event()
        self._done = threading.Event()
        self._beat = threading.Thread(target=self._heartbeats, args=(heartbeat_s,), daemon=True)
        self._beat.start()

    def append(self, kind: int, body: bytes, meta: Optional[Dict[str, Any]] = None, final: bool = False) -> None:
        if self.seq is None:
            self.seq = self.d.journal_append(self.c.id, None, encode_frame(kind, 0, body, meta), final=final)
        else:
            self.seq += 1
            self.d.journal_append(self.c.id, self.seq, encode_frame(kind, self.seq, body, meta), final=final)

    def _heartbeats(self, every: float) -> None:
        while not self._done.wait(every):
            try:
                if self.d.heartbeat(self.c.id, self.worker_id):
                    self.cancelled.set()
                    return
            except (FencingConflict, NotFound):
                self.lost.set()
                return
            except Exception:
                continue

    def finish(self) -> None:
        self._done.set()


class _Unrunnable(LookupError):
    """A job this worker cannot start (no such function): another attempt would fail the same way."""


def run_worker(dispatch: Any, queue: str, registry: Dict[str, Callable[..., Any]], *, once: bool = False, once_wait: float = 2.0,
               retries: Optional[int] = None, stop: Optional[threading.Event] = None, worker_id: Optional[str] = None,
               wait: float = 20.0, lease: float = 30.0, on_done: Optional[Callable[[Dict[str, Any], Dict[str, Any]], Any]] = None) -> int:
    """Serves `queue` until `stop` is set; returns the number of jobs run. With `once` it runs at
    most one job: on an empty queue it waits `once_wait` seconds for one, then returns 0. When
    `stop` is set, the claim waiting on the plane is called off (cancel_claim): it takes no job.

    A plain function's JSON result is acked. A generator streams one VALUE frame per yield, then
    END. A failure writes an ERROR frame and nacks with retry: the plane retries it within the
    job's attempt budget (its own max_attempts, else its queue's, else 3) and fails it once that
    is spent. `retries` (and an envelope's `max_retries`) only lower that: no retry after attempt
    `retries` + 1. A job naming a function the registry lacks fails at once. The job's lease is
    heartbeaten while it runs; a job cancelled meanwhile stops streaming.

    `on_done(job, outcome)` sees each job as its handler ends: `job` is `{"id", "queue",
    "attempt", "fn", "origin"}`, `outcome` `{"state": "succeeded", "result"}` or `{"state":
    "failed", "error"}`. For a failure it may return "handled": the job fails without a retry, the
    application having recorded the failure as a fact instead of retrying a side effect."""
    worker_id = worker_id or "%s:%d:py" % (socket.gethostname(), os.getpid())
    stop = stop or threading.Event()
    executed = 0
    claiming: Dict[str, str] = {}  # the claim waiting now, by name, for the stop watcher to call off
    done = threading.Event()

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
    try:
        while not stop.is_set():
            claim_id = uuid.uuid4().hex
            claiming["id"] = claim_id
            c = dispatch.claim(queue, worker_id, wait=once_wait if once else wait, lease=lease,
                               **({"claim_id": claim_id} if can_cancel else {}))
            claiming.pop("id", None)
            if c is None:
                if once:
                    return 0
                continue
            if stop.is_set():
                # Stopped while the answer was on its way: give the job back untouched (a claim
                # called off moments after its answer puts its job back without charging an attempt).
                if not (can_cancel and dispatch.cancel_claim(queue, worker_id, claim_id)):
                    dispatch.nack(c.id, worker_id, error="the worker stopped before starting it", retry=True)
                break
            executed += 1
            _run_one(dispatch, c, worker_id, registry, retries, max(0.2, lease / 3), on_done)
            if once:
                break
    finally:
        done.set()
    return executed


def _told(on_done: Any, c: Any, env: Dict[str, Any], outcome: Dict[str, Any]) -> Any:
    """Tells on_done a job's outcome; what it answers (or None when it raised)."""
    if on_done is None:
        return None
    try:
        return on_done({"id": c.id, "queue": c.queue, "attempt": c.attempt, "fn": env.get("fn"), "origin": env.get("origin")}, outcome)
    except Exception:
        return None


def _run_one(d: Any, c: Any, worker_id: str, registry: Dict[str, Callable[..., Any]], retries: Optional[int], heartbeat_s: float,
             on_done: Optional[Callable[[Dict[str, Any], Dict[str, Any]], Any]] = None) -> None:
    job = _Job(d, c, worker_id, heartbeat_s)
    env: Dict[str, Any] = {}
    try:
        env = decode_envelope(c.envelope)
        fn = registry.get(env["fn"])
        if fn is None:
            raise _Unrunnable("function %r is not registered with this worker" % env["fn"])
        out = fn(*env.get("args", []), **env.get("kwargs", {}))
        result: Any = out
        if inspect.isgenerator(out):
            job.append(BEGIN, b"", {"attempt": c.attempt})
            try:
                while True:
                    if job.cancelled.is_set() or job.lost.is_set():
                        out.close()
                        return
                    job.append(VALUE, _json(next(out)))
            except StopIteration as stop_it:
                result = stop_it.value
            job.append(END, b"", None, final=True)
        if job.cancelled.is_set() or job.lost.is_set():
            return
        _told(on_done, c, env, {"state": "succeeded", "result": result})
        d.ack(c.id, worker_id, result=_json(result))
    except (FencingConflict, NotFound):
        return  # the lease was lost or the job cancelled: this attempt writes nothing more
    except Exception as e:
        caps = [r for r in (retries, env.get("max_retries")) if isinstance(r, int) and not isinstance(r, bool)]
        handled = _told(on_done, c, env, {"state": "failed", "error": e}) == "handled"
        retry = not handled and not isinstance(e, _Unrunnable) and all(c.attempt <= r for r in caps)
        error = {"message": str(e), "type": type(e).__name__, "stack": traceback.format_exc()}
        try:
            job.append(ERROR, _json(error), {"attempt": c.attempt}, final=not retry)
            d.nack(c.id, worker_id, error=error, retry=retry)
        except (FencingConflict, NotFound):
            return
    finally:
        job.finish()
