"""CHUNK frames, coalesced, as the Node worker writes them (client/worker/chunks.ts). A handler
that writes many small pieces (tokens, log lines) would cost a journal row and a round trip per
piece. Instead a write to an idle writer goes out at once, and everything written while a frame
is in flight, or within `window_s` of the last frame, goes out together as the next one (up to
`max_bytes`). The handler never waits on a write: a thread of the writer sends, while there is
something to send. The bytes arrive in order, unchanged."""
import threading
import time
from typing import Callable, Optional, Union


class ChunkWriter:
    def __init__(self, send: Callable[[bytes], None], max_bytes: int = 64 << 10, window_s: float = 0.003):
        self._send = send
        self._max = max_bytes
        self._window = window_s
        self._lock = threading.Condition()
        self._parts = bytearray()
        self._draining = False
        self._failure: Optional[BaseException] = None
        self._closed = False
        self._last = float("-inf")
        #: Frames sent so far.
        self.frames = 0

    def write(self, data: Union[str, bytes, bytearray, memoryview]) -> None:
        """Queues bytes (a str is written as UTF-8). Raises the error of an earlier frame that
        could not be sent. After close() (the attempt ended), a write goes nowhere."""
        if isinstance(data, str):
            b = data.encode("utf-8")
        elif isinstance(data, (bytes, bytearray, memoryview)):
            b = bytes(data)
        else:
            raise TypeError("write takes str or bytes, got %s" % type(data).__name__)
        with self._lock:
            if self._failure is not None:
                raise self._failure
            if self._closed or not b:
                return
            self._parts += b
            if not self._draining:
                self._draining = True
                threading.Thread(target=self._drain, name="lakeshore-chunks", daemon=True).start()

    def flush(self) -> None:
        """Returns once everything written so far is in the journal; raises a failed send's error."""
        with self._lock:
            while self._draining:
                self._lock.wait()
            if self._failure is not None:
                raise self._failure

    def close(self) -> None:
        """The attempt ended: what is still queued is dropped, and later writes go nowhere."""
        with self._lock:
            self._closed = True
            self._parts.clear()

    def _drain(self) -> None:
        while True:
            with self._lock:
                wait = self._last + self._window - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            with self._lock:
                if not self._parts:  # said under the lock a write takes: none is left behind
                    self._draining = False
                    self._lock.notify_all()
                    return
                body = bytes(self._parts[:whole_chars(self._parts, self._max)])
                del self._parts[:len(body)]
                self._last = time.monotonic()
            try:
                self._send(body)
            except BaseException as e:  # noqa: BLE001 - kept, and raised by the next write or flush
                with self._lock:
                    self._failure = e
                    self._parts.clear()
                    self._draining = False
                    self._lock.notify_all()
                return
            self.frames += 1


def whole_chars(b: Union[bytes, bytearray], limit: int) -> int:
    """How many of `b`'s bytes, at most `limit`, make frames of whole UTF-8 characters: the cut
    goes back before the continuation bytes (10xxxxxx, at most three) that start the rest, so each
    frame of written text decodes alone (a browser reads one frame at a time). Bytes that are no
    UTF-8 are cut at `limit`; all of `b` when it is no longer."""
    if len(b) <= limit:
        return len(b)
    cut = limit
    while cut > limit - 3 and cut > 1 and b[cut] & 0xC0 == 0x80:
        cut -= 1
    return limit if b[cut] & 0xC0 == 0x80 else cut
