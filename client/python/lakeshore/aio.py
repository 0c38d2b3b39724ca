"""AsyncQueue: SyncQueue for asyncio programs (agents, async web handlers). Every call is awaited
and none blocks the event loop, so one loop can wait on many jobs at once.

>>> q = AsyncQueue("tools")                     # the process's default plane, as SyncQueue
>>> h = await q.submit(search, "weather in Oslo")
>>> async for token in h.stream(): print(token, end="")
>>> await h.result(timeout=60)
>>> results = await asyncio.gather(*(h.result() for h in await q.map(search, queries)))

The clients underneath block (http.client, sqlite3), so each call runs in a thread, with the
caller's context (its span, the running job a handler's submit is made from):
- short calls (submit, map, get, cancel, the schedules) in the loop's default executor;
- the results of an AsyncQueue's handles together, a thread for up to 1,000 jobs of a queue
  (aio_shared.py), so a gather over thousands of handles holds a few threads, not one each;
- other waits (a result by id alone, a stream) in a thread of their own, which waits on the plane in slices of at most
  `WAIT_SLICE` seconds. When the awaiting task is cancelled (`asyncio.wait_for`, a task group
  giving up) or a stream is left, the thread stops at the end of its slice: no thread outlives its
  awaiter by more than a slice.

To bound a wait, give `result(timeout=)` (or `stream(timeout=)`) rather than `asyncio.wait_for`:
the wait then ends on time, thread and all. Cancelling an await does not cancel the job (`await
h.cancel()` does), and a cancelled `submit` may still have reached the plane: give it an `id`
(`submit_with({"id": ...}, ...)`) to submit it again safely.
"""
import asyncio
import contextvars
import threading
import time
import weakref
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Union

from .aio_shared import shared_waits
from .checks import _number
from .errors import Timeout
from .frames import END, VALUE, decode_frame
from .lanes import each_answered
from .plane import default_dispatch
from .queue import Fn, Handle, SyncQueue, _json_value

#: The longest one wait on the plane lasts before its thread looks whether anyone still awaits it:
#: how long a wait given up holds its thread, against a request (a result's long-poll) per slice
#: of a long job. The blocking client's slices are 50 s.
WAIT_SLICE = 20.0
#: Values a stream reads ahead of its consumer.
STREAM_AHEAD = 64


def _bound(timeout: Optional[float]) -> float:
    """A wait's bound in seconds (None: none), refused as the blocking calls refuse it."""
    return float("inf") if timeout is None else float(_number("timeout", timeout, 0))


async def _waited(work: Callable[[threading.Event], Any]) -> Any:
    """Runs `work(stopped)` in a thread of its own, in the caller's context; `stopped` is set once
    the awaiting task is done with it (answered, or cancelled)."""
    loop = asyncio.get_running_loop()
    answer: "asyncio.Future[Any]" = loop.create_future()
    stopped = threading.Event()
    ctx = contextvars.copy_context()

    def settle(value: Any, error: Optional[BaseException]) -> None:
        if answer.done():
            return  # cancelled: nobody awaits it
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(value)

    def run() -> None:
        try:
            value, error = ctx.run(work, stopped), None
        except BaseException as e:  # noqa: BLE001 (handed to the awaiter, whatever it is)
            value, error = None, e
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:
            pass  # the loop closed: nobody awaits it

    threading.Thread(target=run, name="lakeshore-wait", daemon=True).start()
    try:
        return await answer
    finally:
        stopped.set()


async def _relayed(produce: Callable[[threading.Event, Callable[[Any], bool]], None], name: str) -> AsyncIterator[Any]:
    """What `produce(stopped, emit)` emits, in a thread of its own (in the caller's context), handed
    to the loop as it comes: at most STREAM_AHEAD ahead of the reader, and raising what it raised.
    `emit` answers False once the reader has left (`stopped` is set then): the producer returns."""
    loop = asyncio.get_running_loop()
    inbox: "asyncio.Queue[tuple]" = asyncio.Queue()
    credit = threading.Semaphore(STREAM_AHEAD)
    stopped = threading.Event()

    def post(item: tuple) -> bool:
        try:
            loop.call_soon_threadsafe(inbox.put_nowait, item)
            return True
        except RuntimeError:
            return False  # the loop closed

    def emit(value: Any) -> bool:
        while not credit.acquire(timeout=WAIT_SLICE):
            if stopped.is_set():
                return False
        return not stopped.is_set() and post(("value", value))

    ctx = contextvars.copy_context()

    def run() -> None:
        try:
            ctx.run(produce, stopped, emit)
            post(("end", None))
        except BaseException as e:  # noqa: BLE001 (raised in the reader's task)
            post(("error", e))

    threading.Thread(target=run, name=name, daemon=True).start()
    try:
        while True:
            kind, value = await inbox.get()
            if kind == "error":
                raise value
            if kind == "end":
                return
            credit.release()
            yield value
    finally:
        stopped.set()


def events(dispatch: Any = None, queue: Optional[str] = None, *, kinds: Optional[List[str]] = None) -> AsyncIterator[Dict[str, Any]]:
    """The lifecycle feed of `queue` (None: every queue of the namespace) on `dispatch` (None: the
    process's default plane), live, as `dispatch.events` gives it: a record per committed
    transition (`{"kind": "job", "id", "queue", "status", "attempt", "worker_id", "at", ...}`),
    `kinds` keeping only some. Its thread stops at the next record or keepalive after its reader
    leaves (the plane sends one every 15 s)."""
    d = dispatch if dispatch is not None else default_dispatch()

    def follow(stopped: threading.Event, emit: Callable[[Any], bool]) -> None:
        for record in d.events(queue, kinds=kinds, stop=stopped):
            if not emit(record):
                return

    return _relayed(follow, "lakeshore-events")


class AsyncHandle:
    """A submitted invocation, awaited: its id, and what it gives back. Its result waits with the
    other jobs awaited in its queue (aio_shared.py): an AsyncQueue's handles know it; one made from
    a bare id learns it with the others awaited at once."""

    def __init__(self, inv_id: str, dispatch: Any, queue: Optional[str] = None):
        self.id = inv_id
        self.dispatch = dispatch
        self.queue = queue

    async def result(self, timeout: Optional[float] = None) -> Any:
        """The decoded return value, as Handle.result: as long as the job takes, or `timeout`
        seconds (then Timeout); raises InvocationFailed or InvocationCancelled as the job ended so."""
        deadline = time.monotonic() + _bound(timeout)
        shared = shared_waits(self.dispatch, WAIT_SLICE)
        if shared is not None and self.queue is None and callable(getattr(self.dispatch, "get_many", None)):
            self.queue = await shared.locate(self.id)  # with the others of unknown queues awaited now
        if shared is not None and self.queue is not None:
            answer = shared.wait(self.queue, self.id, deadline)  # type: ignore[arg-type]
            try:
                item = await (answer if timeout is None else asyncio.wait_for(answer, max(0.0, deadline - time.monotonic())))
            except asyncio.TimeoutError:
                raise Timeout("invocation %s did not end within %ss" % (self.id, timeout)) from None
            if item is not None:
                if "error" in item:
                    raise item["error"]
                return _json_value(item["result"])

        def wait(stopped: threading.Event) -> Any:
            while True:
                left = deadline - time.monotonic()
                try:
                    return self.dispatch.result(self.id, timeout=max(0.0, min(left, WAIT_SLICE)))
                except Timeout:
                    if time.monotonic() >= deadline:
                        raise Timeout("invocation %s did not end within %ss" % (self.id, timeout)) from None
                    if stopped.is_set():
                        raise
        return _json_value(await _waited(wait))

    def stream(self, timeout: Optional[float] = None) -> AsyncIterator[Any]:
        """The values the job yields, decoded, as it yields them, as Handle.stream: `timeout` bounds
        the silence between values (None: no bound), and a job that fails or is cancelled raises
        after its last value."""
        silence = _bound(timeout)

        def follow(stopped: threading.Event, emit: Callable[[Any], bool]) -> None:
            cursor, last, heard = -1, None, time.monotonic()
            while not stopped.is_set():
                left = silence - (time.monotonic() - heard)
                if left <= 0:
                    raise Timeout("journal of %s wrote nothing for %ss and has not ended" % (self.id, timeout))
                frames = self.dispatch.journal_read(self.id, since=cursor, timeout=min(left, WAIT_SLICE))
                try:
                    for seq, frame in frames:
                        cursor, heard = seq, time.monotonic()
                        kind, _, body, _ = decode_frame(frame)
                        last = kind
                        if kind == VALUE and not emit(_json_value(body)):
                            return
                except Timeout:
                    continue  # a slice's silence: look whether anyone still reads, then read on
                finally:
                    frames.close()  # its connection, at once
                if last != END:  # a generator's END says it returned; anything else, the row says how it ended
                    self.dispatch.result(self.id, timeout=timeout)
                return

        return _relayed(follow, "lakeshore-stream")

    async def get(self) -> Optional[Dict[str, Any]]:
        """The job's row now (state, attempt, error, times), or None once it is deleted."""
        return await asyncio.to_thread(self.dispatch.get, self.id)

    async def cancel(self) -> bool:
        return bool(await asyncio.to_thread(self.dispatch.cancel, self.id))

    def __repr__(self) -> str:
        return "AsyncHandle(%r)" % self.id


class _Submits:
    """The submits of one event loop to one queue of one plane, coalesced as Node's client does
    (client/batcher.ts): those made in the same turn of the loop, and those made while earlier
    batches are in flight, go out as one `submit_many` (at most two in flight, 500 jobs each), in a
    thread; a lone one goes as a plain `submit`. Each caller is answered its own id or error."""

    MAX_IN_FLIGHT = 2
    MAX_BATCH = 500
    _by_loop: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Dict[Any, _Submits]]" = weakref.WeakKeyDictionary()

    def __init__(self, dispatch: Any, queue: str) -> None:
        self.dispatch, self.queue = dispatch, queue  # not the loop: the table's key must stay collectable
        self.pending: List[Any] = []  # (submit's arguments, the caller's future)
        self.in_flight = 0
        self.scheduled = False

    @classmethod
    def of(cls, dispatch: Any, queue: str) -> "_Submits":
        loop = asyncio.get_running_loop()
        mine = cls._by_loop.setdefault(loop, {})
        key = (id(dispatch), queue)
        if key not in mine or mine[key].dispatch is not dispatch:
            mine[key] = cls(dispatch, queue)
        return mine[key]

    def add(self, item: Dict[str, Any]) -> "asyncio.Future[str]":
        answer: "asyncio.Future[str]" = asyncio.get_running_loop().create_future()
        self.pending.append((item, answer))
        self._schedule()
        return answer

    def _schedule(self) -> None:
        if self.scheduled or self.in_flight >= self.MAX_IN_FLIGHT or not self.pending:
            return
        self.scheduled = True
        asyncio.get_running_loop().call_soon(self._flush)  # after this turn's other submits joined

    def _flush(self) -> None:
        self.scheduled = False
        if self.in_flight >= self.MAX_IN_FLIGHT or not self.pending:
            return
        batch, self.pending = self.pending[:self.MAX_BATCH], self.pending[self.MAX_BATCH:]
        self.in_flight += 1
        asyncio.get_running_loop().create_task(self._send(batch))

    async def _send(self, batch: List[Any]) -> None:
        try:
            items = [item for item, _ in batch]
            try:
                answers = await asyncio.to_thread(self._submit, items)
            except Exception as e:
                answers = [e] * len(items)
            for (_, answer), got in zip(batch, answers + [RuntimeError("the plane answered fewer results than it was sent")] * len(batch)):
                if answer.done():  # its caller was cancelled: the job went out all the same
                    continue
                if isinstance(got, BaseException):
                    answer.set_exception(got)
                else:
                    answer.set_result(got)
        finally:
            self.in_flight -= 1
            self._schedule()
            if not (self.pending or self.in_flight or self.scheduled):
                # Idle: out of the table, so neither it nor its plane's client outlives their use.
                mine = self._by_loop.get(asyncio.get_running_loop(), {})
                if mine.get((id(self.dispatch), self.queue)) is self:
                    del mine[(id(self.dispatch), self.queue)]

    def _submit(self, items: List[Dict[str, Any]]) -> List[Any]:
        """In a thread: the items' ids or errors, in order."""
        def one(item: Dict[str, Any]) -> str:
            item = dict(item)
            return self.dispatch.submit(self.queue, item.pop("envelope"), **item)
        return each_answered(items, one, lambda its: self.dispatch.submit_many(self.queue, its))

class AsyncQueue:
    """A named queue on a plane (the process's default one unless `dispatch` is given), with
    SyncQueue's calls awaited and AsyncHandles for answers."""

    def __init__(self, name: str, dispatch: Any = None):
        self.sync = SyncQueue(name, dispatch)
        self.name = name
        self.dispatch = self.sync.dispatch

    def _handle(self, h: Optional[Handle]) -> Optional[AsyncHandle]:
        return None if h is None else AsyncHandle(h.id, self.dispatch, self.name)

    async def submit(self, fn: Fn, *args: Any, **kwargs: Any) -> AsyncHandle:
        """Submits `fn(*args, **kwargs)`, as SyncQueue.submit."""
        return await self.submit_with({}, fn, *args, **kwargs)

    async def submit_with(self, options: Dict[str, Any], fn: Fn, *args: Any, **kwargs: Any) -> AsyncHandle:
        """Submits with options, as SyncQueue.submit_with. Submits made at once on one event loop
        to one queue go out together (_Submits), each answered its own id or error."""
        if options.get("code") == "push" or options.get("by_value"):  # a tree to push, a function to pickle: a thread
            h = await asyncio.to_thread(self.sync.submit_with, options, fn, *args, **kwargs)
            return AsyncHandle(h.id, self.dispatch, self.name)
        with self.sync._submitting(options, fn, args, kwargs) as item:
            inv_id = await _Submits.of(self.dispatch, self.name).add(item)
        return AsyncHandle(inv_id, self.dispatch, self.name)

    async def map(self, fn: Fn, *iterables: Any) -> List[AsyncHandle]:
        """Submits `fn(*args)` for each tuple of args, as SyncQueue.map: handles in order, and a
        refusal raised once all were tried, its `handles` AsyncHandles (None where refused)."""
        try:
            handles = await asyncio.to_thread(self.sync.map, fn, *iterables)
        except Exception as e:
            if isinstance(getattr(e, "handles", None), list):
                e.handles = [self._handle(h) for h in e.handles]  # type: ignore[attr-defined]
            raise
        return [AsyncHandle(h.id, self.dispatch, self.name) for h in handles]

    async def schedule(self, name: str, cron: str, fn: Fn, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.schedule, name, cron, fn, *args, **kwargs)

    async def schedule_with(self, options: Dict[str, Any], name: str, cron: str, fn: Fn, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.schedule_with, options, name, cron, fn, *args, **kwargs)

    async def schedules(self) -> List[Dict[str, Any]]:
        return await asyncio.to_thread(self.sync.schedules)

    async def unschedule(self, name: str) -> None:
        await asyncio.to_thread(self.sync.unschedule, name)

    def events(self, *, kinds: Optional[List[str]] = None) -> AsyncIterator[Dict[str, Any]]:
        """This queue's lifecycle feed, live (`events(self.dispatch, self.name, kinds=kinds)`)."""
        return events(self.dispatch, self.name, kinds=kinds)

    def stream(self, inv: Union[AsyncHandle, Handle, str], timeout: Optional[float] = None) -> AsyncIterator[Any]:
        """The values of `inv` (a handle or an id), as AsyncHandle.stream."""
        return AsyncHandle(inv if isinstance(inv, str) else inv.id, self.dispatch).stream(timeout)

    def __repr__(self) -> str:
        return "AsyncQueue(%r)" % self.name
