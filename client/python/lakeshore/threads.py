"""A process's worker loops together: each in a thread of its own (together), the jobs they run
(running), an interrupt's second stop putting those back (put_back), and a caller's stop as an
Event (_stop_event, _Either)."""
import sys
import threading
from typing import Any, Callable, Dict, List, Optional


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
