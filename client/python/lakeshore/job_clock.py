"""The worker's threads for its running jobs: one that sends every job's heartbeats, and one
reused to run each job's call under its time limit.

A job used to start two threads of its own: one for its heartbeats, and one to run its call so
that the worker could leave a call running past its limit (Python cannot stop a thread). Starting
them took about half of a worker's time on short jobs. Here the heartbeats of every job in the
process come from one thread, and the calls run on a thread that is handed the next call when it
is done; one left running past a limit is abandoned, and the next call gets a new thread. The
call thread ends with its worker. A heartbeat waiting for a plane that is away holds back the next
ones of every job in the process: they go to that plane too, as a rule, and it is away for them.
"""

import contextvars
import queue
import threading
import time
from typing import Any, Callable, Dict, List, Optional


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


class TimeLimitExceeded(Exception):
    """A job ran past its envelope's time_limit_ms."""


class Runner:
    """Runs calls one at a time on a reused daemon thread; a call past its deadline is left running
    on that thread, which then ends, and the next call gets a thread of its own."""

    def __init__(self) -> None:
        self._calls: "Optional[queue.SimpleQueue[Any]]" = None

    def run(self, deadline: Optional[float], limit: str, call: Callable[[], Any]) -> Any:
        """`call` in a copy of the caller's contextvars context (the running job), raising
        TimeLimitExceeded once `deadline` (monotonic) passes; no deadline: it runs in the caller's thread."""
        if deadline is None:
            return call()
        if self._calls is None:
            self._calls = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(self._calls,), daemon=True, name="lakeshore-job").start()
        box: Dict[str, Any] = {}
        done = threading.Event()
        self._calls.put((contextvars.copy_context(), call, box, done))
        if not done.wait(max(0.0, deadline - time.monotonic())):
            self.close()  # abandoned: the thread ends once the call does
            raise TimeLimitExceeded("the job ran past its time limit of %s" % limit)
        if "error" in box:
            raise box["error"]
        return box.get("value")


    def close(self) -> None:
        """Ends the thread once its call (if any) is done; a later call starts a new one."""
        if self._calls is not None:
            self._calls.put(None)
            self._calls = None


def _serve(calls: "queue.SimpleQueue[Any]") -> None:
    while True:
        item = calls.get()
        if item is None:
            return
        ctx, call, box, done = item
        try:
            box["value"] = ctx.run(call)
        except BaseException as e:  # re-raised in the worker's thread, StopIteration included
            box["error"] = e
        finally:
            done.set()
