"""One attempt of a claimed job, from its envelope to its ack or nack: the handler resolved and
called, its values streamed as frames, its result or failure written, and what each outcome says
(the worker's log, on_done)."""
import inspect
import json
import logging
import os
import time
import traceback
from typing import Any, Callable, Dict, Optional

from .context import _current, _LogShipper, JobContext
from .envelope import decode_envelope, json_bytes
from .errors import FencingConflict, NotFound, PayloadTooLarge
from .frames import BEGIN, END, ERROR, VALUE
from .job import _CANCELLED, _LOST, _Job, _Steps, _awaited, _within
from .job_clock import TimeLimitExceeded
from .resolve import Resolver, Unrunnable
from .tracing import run_span


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
