"""Result waits shared, for AsyncHandle.result: the awaits of many jobs of one queue wait on the
plane together, a `results` call for up to 1,000 of them in a thread of its own, where each await
took a thread (and, on an HTTP plane, a connection). A sweep's
`await asyncio.gather(*(h.result() for h in handles))` over 3,000 jobs is three calls, not
3,000 threads.

Handles that do not know their queue (made from bare ids) are looked up first, those awaited in
one turn of the loop together (`get_many`, 1,000 a call), then wait the same way.

Awaits begun in the same turn of the loop go out together; awaits begun while calls of their queue
are out go in a new one, and past MAX_CALLS of a queue the smallest call is given up and its jobs
join the new one. A given-up call's thread ends with its slice, its answer unread. An answer
settles the awaits of the jobs that ended; the rest wait on in the call's next round. A job the
queue does not have (NotFound), or a call that failed, is handed back to the single wait, which
says what it always said. An await that is cancelled leaves its job's wait, and a call with no
job left to wait on is given up.
"""
import asyncio
import threading
import time
import weakref
from typing import Any, Dict, List, Optional, Set

from .errors import NotFound

#: The most jobs one call waits on (the plane's batch limit).
MAX_IDS = 1000
#: The most calls of a queue out at once, before the smallest is merged into the next.
MAX_CALLS = 4
#: Fewer awaits of jobs of unknown queues than this in a turn of the loop wait alone: a look-up would only add a round trip.
FEW = 4


class _Call:
    def __init__(self, ids: List[str]):
        self.ids: Set[str] = set(ids)
        self.off = False
        #: The plane's cursor from the last answer: the next round reads again only jobs ended since.
        self.cursor: Optional[str] = None


class SharedWaits:
    """The shared waits of one dispatch on one event loop. Every method runs on the loop's thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, dispatch: Any, slice_s: float):
        self.loop = loop
        self.dispatch = dispatch
        self.slice = slice_s
        self.waiting: Dict[str, Dict[str, Set["asyncio.Future[Any]"]]] = {}
        self.unsent: Dict[str, Set[str]] = {}
        self.out: Dict[str, List[_Call]] = {}
        #: Per queue and job, the latest deadline (time.monotonic) of its awaits: a call waits no
        #: longer than the latest of its jobs', so a bounded await leaves no thread behind it.
        self.until: Dict[str, Dict[str, float]] = {}
        self.scheduled = False
        #: Awaits of jobs whose queue the handle does not know, to be looked up together (locate).
        self.unlocated: Dict[str, List["asyncio.Future[Optional[str]]"]] = {}
        self.locating = False

    def wait(self, queue: str, inv_id: str, deadline: float = float("inf")) -> "asyncio.Future[Any]":
        """A future of `inv_id`'s answer: `{"id", "result"}` or `{"id", "error"}` once it ended, or
        None when the single wait must take it. `deadline`: when its await gives up (monotonic)."""
        fut: "asyncio.Future[Any]" = self.loop.create_future()
        until = self.until.setdefault(queue, {})
        until[inv_id] = max(until.get(inv_id, 0.0), deadline)
        ids = self.waiting.setdefault(queue, {})
        if inv_id in ids:
            ids[inv_id].add(fut)
        else:
            ids[inv_id] = {fut}
            if not self._sent(queue, inv_id):
                self.unsent.setdefault(queue, set()).add(inv_id)
                if not self.scheduled:
                    self.scheduled = True
                    self.loop.call_soon(self._flush)
        fut.add_done_callback(lambda f: self._drop(queue, inv_id, f))
        return fut

    def locate(self, inv_id: str) -> "asyncio.Future[Optional[str]]":
        """A future of `inv_id`'s queue, looked up with the other jobs of unknown queues awaited in
        this turn of the loop (`get_many`, 1,000 a call, in a thread); None when it waits alone
        (fewer than FEW, not found, or the look-up failed)."""
        fut: "asyncio.Future[Optional[str]]" = self.loop.create_future()
        self.unlocated.setdefault(inv_id, []).append(fut)
        if not self.locating:
            self.locating = True
            self.loop.call_soon(self._locate)
        return fut

    def _locate(self) -> None:
        self.locating = False
        batch, self.unlocated = self.unlocated, {}
        ids = list(batch)

        def settle(part: List[str], queues: List[Optional[str]]) -> None:
            for inv_id, queue in zip(part, queues):
                for fut in batch[inv_id]:
                    if not fut.done():
                        fut.set_result(queue)

        if len(ids) < FEW:
            settle(ids, [None] * len(ids))
            return

        def run() -> None:
            for i in range(0, len(ids), MAX_IDS):
                part = ids[i:i + MAX_IDS]
                try:
                    queues = [None if r is None else r["queue"] for r in self.dispatch.get_many(part)]
                except BaseException:  # noqa: BLE001 (each await's single wait says what went wrong)
                    queues = [None] * len(part)
                try:
                    self.loop.call_soon_threadsafe(settle, part, queues)
                except RuntimeError:
                    return  # the loop closed: nobody awaits them

        threading.Thread(target=run, name="lakeshore-lookup", daemon=True).start()

    def calls(self) -> int:
        """Calls out now (for tests)."""
        return sum(len(c) for c in self.out.values())

    def _sent(self, queue: str, inv_id: str) -> bool:
        return inv_id in self.unsent.get(queue, ()) or any(inv_id in c.ids for c in self.out.get(queue, ()))

    def _flush(self) -> None:
        self.scheduled = False
        unsent, self.unsent = self.unsent, {}
        for queue, ids in unsent.items():
            outs = self.out.setdefault(queue, [])
            while len(outs) >= MAX_CALLS:
                smallest = min(outs, key=lambda c: len(c.ids))
                outs.remove(smallest)
                smallest.off = True
                ids |= smallest.ids
            every = sorted(ids)
            for i in range(0, len(every), MAX_IDS):
                call = _Call(every[i:i + MAX_IDS])
                outs.append(call)
                self._ask(queue, call)

    def _ask(self, queue: str, call: _Call) -> None:
        """The call's next round: a thread that waits on the plane for its jobs still awaited."""
        wanted = self.waiting.get(queue, {})
        call.ids &= set(wanted)
        if call.off or not call.ids:
            self._end(queue, call)
            return
        ids = sorted(call.ids)
        after = call.cursor
        until = self.until.get(queue, {})
        timeout = max(0.0, min(self.slice, max(until.get(i, float("inf")) for i in ids) - time.monotonic()))

        def run() -> None:
            try:
                page = getattr(self.dispatch, "results_page", None)
                items, cursor = page(queue, ids, timeout=timeout, after=after) if page else (self.dispatch.results(queue, ids, timeout=timeout), None)
                error = None
            except BaseException as e:  # noqa: BLE001 (each await's single wait says it its own way)
                items, cursor, error = None, None, e
            # After a round with no end, the next reads every row again: whatever a cursor could miss is found within a round.
            call.cursor = cursor if items else None
            try:
                self.loop.call_soon_threadsafe(self._answered, queue, call, items, error)
            except RuntimeError:
                pass  # the loop closed: nobody awaits them

        threading.Thread(target=run, name="lakeshore-results", daemon=True).start()

    def _answered(self, queue: str, call: _Call, items: Optional[List[Dict[str, Any]]], error: Optional[BaseException]) -> None:
        if call.off:
            return  # its jobs went into another call
        if error is not None or items is None:
            for inv_id in list(call.ids):
                self._settle(queue, inv_id, None)
            self._end(queue, call)
            return
        for item in items:
            call.ids.discard(item["id"])
            self._settle(queue, item["id"], None if isinstance(item.get("error"), NotFound) else item)
        self._ask(queue, call)

    def _settle(self, queue: str, inv_id: str, value: Any) -> None:
        self.until.get(queue, {}).pop(inv_id, None)
        for fut in self.waiting.get(queue, {}).pop(inv_id, ()):
            if not fut.done():
                fut.set_result(value)
        if queue in self.waiting and not self.waiting[queue]:
            del self.waiting[queue]

    def _end(self, queue: str, call: _Call) -> None:
        call.off = True
        outs = self.out.get(queue, [])
        if call in outs:
            outs.remove(call)

    def _drop(self, queue: str, inv_id: str, fut: "asyncio.Future[Any]") -> None:
        if not fut.cancelled():
            return
        ids = self.waiting.get(queue, {})
        futs = ids.get(inv_id)
        if futs is None:
            return
        futs.discard(fut)
        if futs:
            return
        del ids[inv_id]
        self.until.get(queue, {}).pop(inv_id, None)
        if not ids:
            self.waiting.pop(queue, None)
        for call in list(self.out.get(queue, [])):
            call.ids.discard(inv_id)
            if not call.ids:
                self._end(queue, call)


_by_loop: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Dict[int, SharedWaits]]" = weakref.WeakKeyDictionary()


def shared_waits(dispatch: Any, slice_s: float) -> Optional[SharedWaits]:
    """The running loop's shared waits on `dispatch`, or None when the plane has no `results`."""
    if not callable(getattr(dispatch, "results", None)):
        return None
    loop = asyncio.get_running_loop()
    of_loop = _by_loop.setdefault(loop, {})
    w = of_loop.get(id(dispatch))
    if w is None or w.dispatch is not dispatch:
        w = of_loop[id(dispatch)] = SharedWaits(loop, dispatch, slice_s)
    return w
