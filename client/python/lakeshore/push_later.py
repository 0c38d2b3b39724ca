"""Finishing a pushed job after answering 202 Accepted (docs/contract.md, "Push delivery"): a
receiver that takes longer than a request may answers 202 at once and carries on with the
delivery's own token, which acts on that job and attempt alone. What it sends reads as a worker's
would: values stream to whoever watches the job (`handle.stream()`, a browser), and the ack's
result is the job's.

    delivery = ls.verify_delivery(secret, headers, body)
    # ... answer 202, then (a thread, a task queue of the function's platform):
    job = ls.finish_later(delivery)              # the plane at LAKESHORE_URL
    for step in range(epochs):
        job.emit({"step": step, "loss": loss})   # live to the job's readers
    job.ack({"loss": loss})                      # or job.nack(error)
"""
import asyncio
import os
import threading
from typing import Any, Callable, Dict, Mapping, Optional, TypeVar

from .envelope import json_bytes
from .frames import BEGIN, END, ERROR, VALUE, encode_frame
from .http import HttpDispatch

T = TypeVar("T")


class LaterJob:
    """A pushed job its receiver finishes after answering 202: one job, one attempt. A call that
    fails (the plane away past `retry_for`) raises, and may be made again: what reached the plane is
    not sent twice, and the job ends once."""

    def __init__(self, delivery: Mapping[str, Any], url: str, retry_for: float = 15.0):
        self.id: str = delivery["id"]
        self.attempt: int = delivery["attempt"]
        self._worker: str = delivery["worker_id"]
        self._d = HttpDispatch(url, token=delivery["delivery_token"], namespace=delivery["namespace"], retry_for=retry_for)
        # What reached the plane; the lock makes each step once across threads.
        self._lock = threading.RLock()
        self._began = False
        self._closed = False  # END or ERROR appended
        self._ended = False

    def _append(self, kind: int, body: bytes, final: bool = False) -> None:
        self._d.journal_append(self.id, None, encode_frame(kind, 0, body), final=final, worker_id=self._worker, attempt=self.attempt)

    def _open(self) -> None:
        if self._ended:
            raise TypeError("finish_later: job %s attempt %d is already acked or nacked" % (self.id, self.attempt))

    def _end(self, frame: Callable[[], None], verb: Callable[[], T]) -> T:
        with self._lock:
            self._open()
            if self._began and not self._closed:
                frame()
                self._closed = True
            out = verb()
            self._ended = True
            self._d.close()
            return out

    def emit(self, value: Any) -> None:
        """Appends a value (JSON) to the job's journal, as a generator's yield does: its readers see it live."""
        body = json_bytes(value)
        with self._lock:
            self._open()
            if not self._began:
                self._append(BEGIN, b"")
                self._began = True
        self._append(VALUE, body)

    def heartbeat(self) -> bool:
        """Extends the attempt's lease by the queue's (the delivery's lasts the push timeout and a
        margin): call it more often than that while the work goes on. True when the job was
        cancelled: stop, and send nothing more."""
        return self._d.heartbeat(self.id, self._worker, attempt=self.attempt)

    def ack(self, result: Any = None) -> None:
        """Ends the job: succeeded, `result` (JSON) its result."""
        body = json_bytes(result)
        self._end(lambda: self._append(END, b"", final=True),
                  lambda: self._d.ack(self.id, self._worker, result=body, attempt=self.attempt))

    def nack(self, error: Any, *, retry: bool = True, delay: Optional[float] = None) -> str:
        """Ends the attempt as failed: with `retry` (the default) the job is delivered again under
        its queue's budget and backoff (or after `delay` seconds), else it fails now. Answers
        where it went: "queued", "delayed" or "failed"."""
        err: Dict[str, Any] = ({"message": str(error), "type": type(error).__name__} if isinstance(error, BaseException)
                               else {"message": error if isinstance(error, str) else json_bytes(error).decode("utf-8")})
        return self._end(lambda: self._append(ERROR, json_bytes(err), final=not retry),
                         lambda: self._d.nack(self.id, self._worker, error=err, retry=retry, delay=delay, attempt=self.attempt))


def finish_later(delivery: Mapping[str, Any], url: Optional[str] = None, *, retry_for: float = 15.0) -> LaterJob:
    """A pushed job to finish after answering 202, on the plane at `url` (default LAKESHORE_URL:
    the plane the queue lives on; the delivery names its namespace). A delivery from a local
    plane's `lakeshore push` carries no token (there is no HTTP face to use one on): its receiver
    answers with the outcome instead."""
    if not delivery.get("delivery_token"):
        raise TypeError("finish_later: this delivery carries no delivery token (a local plane's `lakeshore push` sends none): "
                        "answer it with its outcome, a 2xx and the result, instead of 202")
    url = url or os.environ.get("LAKESHORE_URL")
    if not url:
        raise TypeError("finish_later: no plane URL: give the URL of the plane the queue lives on, or set LAKESHORE_URL")
    return LaterJob(delivery, url, retry_for)


class AsyncLaterJob:
    """LaterJob for asyncio code (a FastAPI or aiohttp receiver): the same calls, each awaited and
    run in a thread, so none blocks the event loop. A cancelled await does not stop its call: it
    finishes in its thread (and a failed one may be made again, as LaterJob's)."""

    def __init__(self, job: LaterJob):
        self.sync = job
        self.id = job.id
        self.attempt = job.attempt

    async def emit(self, value: Any) -> None:
        """Appends a value (JSON) to the job's journal, as a generator's yield does: its readers see it live."""
        await asyncio.to_thread(self.sync.emit, value)

    async def heartbeat(self) -> bool:
        """Extends the attempt's lease by the queue's; True when the job was cancelled."""
        return await asyncio.to_thread(self.sync.heartbeat)

    async def ack(self, result: Any = None) -> None:
        """Ends the job: succeeded, `result` (JSON) its result."""
        await asyncio.to_thread(self.sync.ack, result)

    async def nack(self, error: Any, *, retry: bool = True, delay: Optional[float] = None) -> str:
        """Ends the attempt as failed, as LaterJob.nack: answers "queued", "delayed" or "failed"."""
        return await asyncio.to_thread(lambda: self.sync.nack(error, retry=retry, delay=delay))


def finish_later_async(delivery: Mapping[str, Any], url: Optional[str] = None, *, retry_for: float = 15.0) -> AsyncLaterJob:
    """finish_later for asyncio code: the same job, its calls awaited (AsyncLaterJob)."""
    return AsyncLaterJob(finish_later(delivery, url, retry_for=retry_for))
