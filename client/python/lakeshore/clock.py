"""The timed work of the Python local plane (local.py), what a queue's alarm does on the Node
planes: the due ticks of its cron schedules (schedules.py), and retention, as the core's
RetentionClock runs it: finished jobs older than their queue's `retention_ms` (else 7 days) are
deleted with their frames by the core's purge statements, in bounded batches (at most
`purge_rounds` of `purge_batch` per state at a time, the rest a second later); and the frames
alone of finished jobs past their queue's `journal_retention_ms`.

A thread of the Dispatch sleeps until a queue's next pass is due. A job that finishes, a changed
retention or schedule, and the first claim this process makes from a queue (its schedules may
have been set by another process) ask for a pass at once; each pass finds when the next one is."""
import threading
import time
from typing import Any, Dict, Optional


class QueueClock:
    def __init__(self, dispatch: Any):
        self.d = dispatch
        self.at: Dict[str, Optional[int]] = {}  # queue -> when its next pass is due (ms); None: nothing kept
        self.known: Dict[str, bool] = {}
        self.window: Dict[str, Optional[int]] = {}  # queue -> its journal_retention_ms, as the last pass found it
        self.asked: set = set()  # queues whose pass soon() brought forward while a pass of theirs ran
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.closed = False
        self.thread: Optional[threading.Thread] = None

    def soon(self, queue: str, changed: bool = False) -> None:
        """A job of `queue` finished (or its retention or a schedule changed): unless a pass is due at a known time, one runs now.
        With a pass known, a finished job's frames may come due before it (journal_retention_ms): the pass comes forward to then."""
        with self.lock:
            if not changed and self.known.get(queue) and self.at.get(queue) is not None:
                window = self.window.get(queue)
                frames = None if window is None else int(time.time() * 1000) + window
                if frames is None or frames >= self.at[queue]:
                    return
                self.at[queue] = frames
                self.asked.add(queue)
                self.wake.set()
                return
            self.known[queue] = False
            self.at[queue] = int(time.time() * 1000)
            self.asked.add(queue)
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="lakeshore-clock", daemon=True)
                self.thread.start()
        self.wake.set()

    def watch(self, queue: str) -> None:
        """A queue this process claims from: a pass now, for what other processes set on it (its schedules)."""
        if queue not in self.known:
            self.soon(queue)

    def close(self) -> None:
        self.closed = True
        self.wake.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(5)

    def _loop(self) -> None:
        while not self.closed:
            now = int(time.time() * 1000)
            with self.lock:
                due = [q for q, t in self.at.items() if t is not None and t <= now]
                self.asked.difference_update(due)
            for q in due:
                if self.closed:
                    return
                try:
                    nxt = self._pass(q)
                except Exception:  # the plane closed under it, or the file is busy: try again in a second
                    nxt = int(time.time() * 1000) + 1000
                with self.lock:
                    # A soon() while the pass ran (a schedule set, a job finished) may have come after
                    # what the pass read: its earlier time stands, or the change would wait for nxt.
                    asked = self.at[q] if q in self.asked else None
                    self.at[q] = nxt if asked is None else asked if nxt is None else min(nxt, asked)
                    self.known[q] = True
            with self.lock:
                times = [t for t in self.at.values() if t is not None]
            wait = None if not times else max(0.0, (min(times) - time.time() * 1000) / 1000)
            self.wake.wait(wait)
            self.wake.clear()

    def _pass(self, queue: str) -> Optional[int]:
        """The queue's due schedule ticks, then its retention; when its next pass is due, or None."""
        tick = self.d._fire(queue)
        purge = self._purge(queue)
        return min((t for t in (tick, purge) if t is not None), default=None)

    def _purge(self, queue: str) -> Optional[int]:
        """Purge batches of `queue` (src/core/sql/purge.ts); when the next purge is due, or None."""
        limits = self.d._limits
        for _ in range(limits["purge_rounds"]):
            # src/core/sql/purge.ts: deletes for each finished state (rows at 1, 3, 5), the frames due
            # alone (ids at 6), when those are next due (9), and when the oldest finished job is (10)
            results = self.d._run("purge", {"queue": queue})
            more = any(len(results[i]) >= limits["purge_batch"] for i in (1, 3, 5, 6))
            frames = results[9][0]
            with self.lock:
                self.window[queue] = None if frames["journal_retention"] is None else int(frames["journal_retention"])
            if not more:
                left = results[10][0]
                due = [int(left["oldest"]) + int(left["retention"])] if left["oldest"] is not None else []
                if frames["due"] is not None:
                    due.append(int(frames["due"]))
                return min(due) if due else None
        return int(time.time() * 1000) + 1000
