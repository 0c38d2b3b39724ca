"""One claimed attempt as its handler runs: its frames, heartbeats and cancel (_Job), a generator's
steps (_Steps), an async handler's event loop, and each call under the job's time limit (_within)."""
import asyncio
import inspect
import threading
from typing import Any, Callable, Dict, Optional

from .chunks import ChunkWriter
from .context import JobContext
from .errors import FencingConflict, NotFound
from .frames import CHUNK, encode_frame
from .job_clock import BEATS, CANCELS, Call, Runner, on_interrupt

_CANCELLED = "the invocation was cancelled"
_LOST = "its lease was lost (it ran out, or the job went to another worker)"


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
