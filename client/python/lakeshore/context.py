"""The running job, as its handler sees it: current_job(), its log lines (to stderr and to the
plane's feed), and the origin a job submitted from inside it gets."""
import contextvars
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from .feed import LOG_LEVELS

LOG_FLUSH_S = 0.2
LOG_BATCH = 100
LOG_BUFFER = 1000


class _LogShipper:
    """A worker's job log lines: to stderr at once, to the plane's feed in batches, best effort
    (docs/contract.md, "Workers"): after LOG_FLUSH_S or LOG_BATCH lines, in order; a failed call
    is dropped and at most LOG_BUFFER lines wait (stderr keeps every line)."""

    def __init__(self, d: Any, worker_id: str):
        self.d, self.worker_id = d, worker_id
        self.waiting: List[Tuple[str, Dict[str, Any]]] = []
        self.dropped = 0
        self._lock = threading.Lock()
        self._send = threading.Lock()
        self._timer: Optional[threading.Timer] = None

    def log(self, queue: str, inv_id: str, level: str, message: str, trace_id: Optional[str]) -> None:
        if level not in LOG_LEVELS:
            raise ValueError("level must be one of %s" % ", ".join(LOG_LEVELS))
        sys.stderr.write("[%s/%s] %s: %s\n" % (queue, inv_id, level, message))
        line = {"id": inv_id, "level": level, "message": message, "trace_id": trace_id, "at": int(time.time() * 1000)}
        with self._lock:
            self.waiting.append((queue, line))
            if len(self.waiting) > LOG_BUFFER:
                self.dropped += len(self.waiting) - LOG_BUFFER
                del self.waiting[: len(self.waiting) - LOG_BUFFER]
            full = len(self.waiting) >= LOG_BATCH
            if not full and self._timer is None:
                self._timer = threading.Timer(LOG_FLUSH_S, self.flush)
                self._timer.daemon = True
                self._timer.start()
        if full:
            self.flush()

    def flush(self) -> None:
        """Sends what waits (calls go one after another: the feed tells the lines in order)."""
        with self._send:
            with self._lock:
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
                batch, self.waiting = self.waiting, []
            send = getattr(self.d, "worker_log", None)
            by_queue: Dict[str, List[Dict[str, Any]]] = {}
            for queue, line in batch:
                by_queue.setdefault(queue, []).append(line)
            for queue, lines in by_queue.items():
                for i in range(0, len(lines), LOG_BATCH):
                    part = lines[i:i + LOG_BATCH]
                    try:
                        if send is None:
                            raise AttributeError("this plane takes no log lines")
                        send(queue, self.worker_id, part)
                    except Exception:
                        self.dropped += len(part)


class JobContext:
    """The running job, for its handler (current_job()): who it is, where it runs, and `log`.
    `root` is the worker's root (run_worker(root=), --root; else the directory it started in), and
    `prefix` the envelope's `prefix` when its producer set one (None otherwise)."""

    def __init__(self, claimed: Any, env: Dict[str, Any], trace_id: Optional[str], logs: _LogShipper, root: Optional[str] = None):
        self.id, self.queue, self.attempt = claimed.id, claimed.queue, claimed.attempt
        self.kwargs: Dict[str, Any] = env.get("kwargs", {})
        self.traceparent: Optional[str] = env.get("traceparent")
        self.origin: Optional[str] = env.get("origin")
        self.trace_id = trace_id
        self.root: str = root or os.getcwd()
        self.prefix: Optional[str] = env.get("prefix") if isinstance(env.get("prefix"), str) else None
        self._logs = logs
        self._chunks: Any = None  # the attempt's ChunkWriter (attempt.py sets it)
        self._stop = threading.Event()
        self._heard = False  # the handler read `stop`: it is told, never interrupted
        self.stop_reason: Optional[str] = None

    @property
    def stop(self) -> threading.Event:
        """Set when this attempt should stop: the job was cancelled, its lease was lost, or it ran
        past its time limit (`stop_reason` says which), as Node's handlers have their AbortSignal.
        A handler that reads it is trusted to check it (`while not job.stop.is_set(): ...`, or
        `job.stop.wait(s)` as its pause) and return, saving what it will first. One that never
        reads it is interrupted instead: JobStopped is raised in its thread (an async one's task
        is cancelled)."""
        self._heard = True
        return self._stop

    def _abort(self, reason: str) -> bool:
        """Tells the handler to stop; True when it should be interrupted (it never read `stop`)."""
        if not self._stop.is_set():
            self.stop_reason = reason
            self._stop.set()
        return not self._heard

    def write(self, data: Union[str, bytes]) -> None:
        """Streams raw output (tokens, log lines) as CHUNK frames of the job's journal, in order.
        It never waits: a write to an idle stream goes out at once, and writes made while a frame
        is on its way, or within 3 ms of the last one, join the next frame (up to 64 KiB). Every
        chunk is in the journal before the job's next frame and its ack. Raises the error of an
        earlier chunk that could not be written."""
        if self._chunks is None:
            raise RuntimeError("write() needs a running attempt of this job")
        self._chunks.write(data)

    def log(self, message: Any, level: str = "info") -> None:
        """Logs a line: to stderr at once, and to the plane's lifecycle feed as a worker record
        `{level, message, id, trace_id}` (best effort). Levels: debug, info, warn, error."""
        self._logs.log(self.queue, self.id, level, message if isinstance(message, str) else str(message), self.trace_id)


_current: "contextvars.ContextVar[Optional[JobContext]]" = contextvars.ContextVar("lakeshore_job", default=None)


_origin_for: Callable[[JobContext], Optional[str]] = lambda job: job.origin


def set_origin_for(fn: Optional[Callable[[JobContext], Optional[str]]]) -> None:
    """Decides the `origin` of a job submitted from inside a running job without one of its own:
    `fn(current_job())` answers it. The default (and `None`) hands the running job's origin on."""
    global _origin_for
    _origin_for = fn if fn is not None else (lambda job: job.origin)


def origin_of(job: JobContext) -> Optional[str]:
    """The origin a job submitted inside `job` gets, by the application's origin_for."""
    out = _origin_for(job)
    if out is not None and not isinstance(out, str):
        raise TypeError("origin_for must answer a string or None, got %r" % (out,))
    return out


def current_job() -> JobContext:
    """The job the calling handler runs for (run_worker sets it); RuntimeError outside a job."""
    job = _current.get()
    if job is None:
        raise RuntimeError("current_job() called outside a lakeshore job")
    return job
