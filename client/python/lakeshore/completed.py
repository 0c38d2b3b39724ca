"""as_completed: the handles of many jobs, each as its job ends, for code that does not await.

A sweep's `for h in ls.as_completed(q.map(train, lrs)): print(h.result())` waits on the plane with
one `results` call for each 1,000 jobs of a queue (a thread each), where a thread pool of
`h.result()` waits took a thread and a connection a job, and a loop over them took the jobs in
submit order, not as they ended. A handle it yields answers its first `result()` from what the
call brought back, with no request of its own.
"""
import queue as queues
import threading
import time
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from .errors import NotFound, Timeout
from .queue import Handle

#: The most jobs one call waits on (the plane's batch limit).
MAX_IDS = 1000
#: The longest one round of a call waits on the plane: a loop left early leaves no thread behind
#: for longer than this.
SLICE = 20.0


def as_completed(handles: Iterable[Handle], timeout: Optional[float] = None) -> Iterator[Handle]:
    """Yields each of `handles` once its job has ended (succeeded, failed or cancelled), the first
    to end first, as `concurrent.futures.as_completed` does with futures. Its `result()` then
    answers at once, from the outcome the wait brought back (the first call; a later one asks the
    plane again). Raises Timeout when `timeout` seconds (None: no bound) pass before every job has
    ended, naming how many are left; the handles yielded before stay yielded.

    The jobs of one queue are waited on together, a `results` call for each 1,000 of them. Handles
    that do not know their queue (made from bare ids) are looked up, 1,000 a request (`get_many`);
    a job the plane no longer has is yielded at once, and its `result()` raises NotFound."""
    deadline = float("inf") if timeout is None else time.monotonic() + timeout
    by_id: Dict[Tuple[int, str], List[Handle]] = {}
    groups: Dict[Tuple[int, str], Tuple[Any, List[str]]] = {}
    gone: List[Handle] = []
    unknown: Dict[int, Tuple[Any, List[Handle]]] = {}
    for h in handles:
        key = (id(h.dispatch), h.id)
        if key in by_id:
            by_id[key].append(h)
        elif h.queue is None:
            by_id[key] = [h]
            unknown.setdefault(id(h.dispatch), (h.dispatch, []))[1].append(h)
        else:
            by_id[key] = [h]
            groups.setdefault((id(h.dispatch), h.queue), (h.dispatch, []))[1].append(h.id)
    for dispatch, some in unknown.values():  # their queues, 1,000 ids a look-up
        for i in range(0, len(some), MAX_IDS):
            part = some[i:i + MAX_IDS]
            for h, row in zip(part, dispatch.get_many([h.id for h in part])):
                if row is None:
                    gone.append(h)
                else:
                    groups.setdefault((id(dispatch), row["queue"]), (dispatch, []))[1].append(h.id)
    for h in gone:
        del by_id[(id(h.dispatch), h.id)]
        h._ended = {"id": h.id, "error": NotFound("invocation %s not found" % h.id)}
        yield h

    answers: "queues.Queue[Tuple[int, Optional[Dict[str, Any]], Optional[BaseException]]]" = queues.Queue()
    stop = threading.Event()
    for (_, queue), (dispatch, ids) in groups.items():
        for i in range(0, len(ids), MAX_IDS):
            threading.Thread(target=_wait, args=(dispatch, queue, ids[i:i + MAX_IDS], deadline, stop, answers),
                             name="lakeshore-results", daemon=True).start()
    try:
        while by_id:
            left = deadline - time.monotonic()
            try:
                dispatch_id, item, error = answers.get(timeout=None if left == float("inf") else max(0.0, left))
            except queues.Empty:
                raise Timeout("%d of the jobs had not ended after %ss" % (len(by_id), timeout)) from None
            if error is not None:
                raise error
            assert item is not None
            for h in by_id.pop((dispatch_id, item["id"]), ()):
                h._ended = item
                yield h
    finally:
        stop.set()  # each call's thread ends with its round


def _wait(dispatch: Any, queue: str, ids: List[str], deadline: float, stop: threading.Event,
          answers: "queues.Queue[Tuple[int, Optional[Dict[str, Any]], Optional[BaseException]]]") -> None:
    """One call's rounds: waits on `ids` until each ended, the deadline passed, or the loop left."""
    rest = set(ids)
    cursor: Optional[str] = None
    page = getattr(dispatch, "results_page", None)
    while rest and not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        try:
            wanted = sorted(rest)
            if page is not None:
                items, got = page(queue, wanted, timeout=min(left, SLICE), after=cursor)
            else:
                items, got = dispatch.results(queue, wanted, timeout=min(left, SLICE)), None
        except BaseException as e:  # noqa: BLE001 (the loop raises it)
            answers.put((id(dispatch), None, e))
            return
        # After a round with no end the next reads every row again: what a cursor could miss is found within a round.
        cursor = got if items else None
        for item in items:
            rest.discard(item["id"])
            answers.put((id(dispatch), item, None))
