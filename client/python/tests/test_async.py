"""AsyncQueue and AsyncHandle (lakeshore/aio.py) on the local plane and, with LAKESHORE_URL, on a
real `wrangler dev`: awaited calls that never block the event loop, and waits that leave no
thread behind once nobody awaits them."""
import asyncio
import os
import sys
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
sys.path.insert(0, os.path.abspath(os.path.dirname(__file__)))

import lakeshore as ls  # noqa: E402
from support import wait_until  # noqa: E402
import lakeshore.aio as aio  # noqa: E402

URL = os.environ.get("LAKESHORE_URL", "")
TOKEN = os.environ.get("LAKESHORE_TOKEN", "")


def count(n):
    for i in range(n):
        yield i
    return n


def square(x):
    return x * x


def boom():
    yield "first"
    raise ValueError("no such city")


def waiting_threads():
    return [t.name for t in threading.enumerate() if t.name in ("lakeshore-wait", "lakeshore-stream", "lakeshore-results")]


async def calls_out(n):
    """Waits, bounded (5 s), on the running loop until `n` results calls are out; the caller asserts what it finds."""
    for _ in range(500):
        if waiting_threads().count("lakeshore-results") >= n:
            return
        await asyncio.sleep(0.01)


class Awaited:
    """The tests, on the plane `self.d` (a subclass's)."""

    d = None

    def worker(self, queue, registry):
        """A worker on `queue` in a thread until the test ends."""
        stop = threading.Event()
        t = threading.Thread(target=ls.run_worker, args=(self.d, queue, registry), kwargs={"stop": stop}, daemon=True)
        t.start()
        self.addCleanup(t.join, 10)
        self.addCleanup(stop.set)

    def test_results_and_streams_are_awaited_while_the_loop_runs_on(self):
        async def main():
            q = ls.AsyncQueue("aq", self.d)
            ticks = 0
            done = asyncio.Event()

            async def ticker():
                nonlocal ticks
                while not done.is_set():
                    ticks += 1
                    await asyncio.sleep(0.01)

            tick = asyncio.create_task(ticker())
            h = await q.submit(count, 3)
            self.assertIsInstance(h, ls.AsyncHandle)
            # Nobody works the queue yet: the wait runs out, and the loop turned all along.
            began = time.monotonic()
            with self.assertRaises(ls.Timeout):
                await h.result(timeout=0.5)
            self.assertGreaterEqual(ticks, 5)
            # A wait bounded by its own timeout ends then, its thread too, not at its slice's end
            # (20 s; the bound below is a timeout kept, with room for a slow machine, not a speed).
            self.assertLess(time.monotonic() - began, aio.WAIT_SLICE / 2)
            wait_until(lambda: not waiting_threads(), lambda: "the wait's thread to end (%s)" % waiting_threads(), timeout=2)
            for bad in (-1, "5"):
                with self.assertRaises(ls.BadRequest):
                    await h.result(timeout=bad)
                with self.assertRaises(ls.BadRequest):
                    await h.stream(timeout=bad).__anext__()
            self.worker("aq", {"count": count, "square": square, "boom": boom})
            self.assertEqual([v async for v in h.stream()], [0, 1, 2])
            self.assertEqual(await h.result(timeout=30), 3)
            # Many waits at once, on one loop.
            hs = await q.map(square, range(12))
            self.assertEqual(await asyncio.gather(*(h.result(timeout=30) for h in hs)), [x * x for x in range(12)])
            # A job that fails raises, from result and after the stream's last value.
            bad = await q.submit(boom)
            with self.assertRaises(ls.InvocationFailed) as e:
                await bad.result(timeout=30)
            self.assertIn("no such city", str(e.exception))
            seen = []
            with self.assertRaises(ls.InvocationFailed):
                async for v in bad.stream(timeout=30):
                    seen.append(v)
            self.assertEqual(seen, ["first", "first"])  # two attempts, each starting its values over
            # A job's row, and cancel.
            later = await q.submit_with({"delay": 3600}, square, 2)
            self.assertEqual((await later.get())["state"], "delayed")
            self.assertTrue(await later.cancel())
            self.assertEqual((await later.get())["state"], "cancelled")
            done.set()
            await tick

        asyncio.run(main())

    def test_many_awaits_wait_on_the_plane_together_a_thread_a_thousand_jobs(self):
        async def main():
            q = ls.AsyncQueue("fan", self.d)
            hs = await q.map(square, range(1200))
            gathered = asyncio.ensure_future(asyncio.gather(*(h.result() for h in hs)))
            await calls_out(2)
            # 1,200 awaits, two calls on the plane (1,000 jobs and 200): no thread for each.
            self.assertEqual(sorted(waiting_threads()), ["lakeshore-results"] * 2)
            self.worker("fan", {"square": square})
            self.assertEqual(await gathered, [x * x for x in range(1200)])

        asyncio.run(main())
        wait_until(lambda: not waiting_threads(), lambda: "the calls' threads to end (%s)" % waiting_threads())

    def test_awaits_of_handles_made_from_bare_ids_are_looked_up_then_shared(self):
        async def main():
            hs = await ls.AsyncQueue("bare", self.d).map(square, range(1200))
            bare = [ls.AsyncHandle(h.id, self.d) for h in hs]  # another program's: ids, no queue
            gathered = asyncio.ensure_future(asyncio.gather(*(h.result() for h in bare)))
            await calls_out(2)
            # Looked up together (a thread, gone once it answered), then two calls: no thread a job.
            self.assertEqual(sorted(waiting_threads()), ["lakeshore-results"] * 2)
            self.assertEqual({h.queue for h in bare}, {"bare"})
            self.worker("bare", {"square": square})
            self.assertEqual(await gathered, [x * x for x in range(1200)])
            # A few awaits are not looked up: each waits alone, as before.
            few = ls.AsyncHandle(hs[0].id, self.d)
            self.assertEqual(await few.result(timeout=30), 0)
            self.assertIsNone(few.queue)

        asyncio.run(main())
        wait_until(lambda: not waiting_threads(), lambda: "the calls' threads to end (%s)" % waiting_threads())

    def test_a_wait_nobody_awaits_leaves_no_thread_behind(self):
        before = aio.WAIT_SLICE
        aio.WAIT_SLICE = 0.2
        self.addCleanup(setattr, aio, "WAIT_SLICE", before)

        async def main():
            h = await ls.AsyncQueue("nobody-works", self.d).submit(square, 3)
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(h.result(), 0.3)
            values = h.stream()
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(values.__anext__(), 0.3)
            await values.aclose()
            return h.id

        inv = asyncio.run(main())
        # Each thread stops at the end of its slice, though the job is still queued: giving up a
        # wait is not cancelling the job.
        wait_until(lambda: not waiting_threads(), lambda: "the waits' threads to stop (%s still run)" % waiting_threads())
        self.assertEqual(self.d.get(inv)["state"], "queued")

    def test_a_feed_is_read_as_it_comes_and_its_thread_leaves_with_its_reader(self):
        async def main():
            q = ls.AsyncQueue("fed", self.d)
            feed = q.events(kinds=["job"])
            nxt = asyncio.ensure_future(feed.__anext__())
            submitted = []
            for _ in range(50):  # the feed is live from when its reader attached: submit until it hears one
                submitted.append((await q.submit(square, 1)).id)
                done, _ = await asyncio.wait({nxt}, timeout=0.5)
                if done:
                    break
            record = nxt.result()
            self.assertEqual((record["kind"], record["queue"], record["status"]), ("job", "fed", "queued"))
            self.assertIn(record["id"], submitted)
            await feed.aclose()
            await q.submit(square, 2)  # a record the left reader's thread wakes on (else a keepalive, 15 s)

        asyncio.run(main())
        wait_until(lambda: not [t for t in threading.enumerate() if t.name == "lakeshore-events"],
                   lambda: "the feed's thread to stop", timeout=20)

    def test_a_handler_submitting_from_async_code_is_its_jobs_parent(self):
        kids = []

        async def parent():
            h = await ls.AsyncQueue("kids", self.d).submit(square, 4)
            kids.append(h.id)
            return h.id

        ls.SyncQueue("parents", self.d).submit_with({"id": "p-%s" % uuid.uuid4().hex[:6]}, "parent")
        self.assertEqual(ls.run_worker(self.d, "parents", {"parent": parent}, once=True), 1)
        self.assertTrue(self.d.get(kids[0])["parent"].startswith("p-"))

    def test_submits_made_at_once_go_out_together_each_answered_its_own(self):
        batches = []
        real = self.d.submit_many

        def submit_many(queue, items):
            batches.append(len(items))
            return real(queue, items)

        self.d.submit_many = submit_many
        self.addCleanup(delattr, self.d, "submit_many")

        async def main():
            q = ls.AsyncQueue("together", self.d)
            hs = await asyncio.gather(*[q.submit(square, i) for i in range(40)])
            sent = len(batches)
            # Refused by the plane (a budget of 0 attempts), and by the client before sending (a
            # priority that is no number): each alone, the others of its batch submitted.
            refused = await asyncio.gather(q.submit(square, 100), q.submit_with({"max_attempts": 0}, square, 101),
                                           q.submit_with({"priority": float("nan")}, square, 102), q.submit(square, 103),
                                           return_exceptions=True)
            lone = await q.submit(square, 7)
            # Idle, the loop keeps nothing of it (a program making a client per request would keep them all).
            kept = dict(aio._Submits._by_loop.get(asyncio.get_running_loop(), {}))
            return hs, sent, refused, lone, kept

        hs, sent, refused, lone, kept = asyncio.run(main())
        self.assertEqual(kept, {})
        self.assertEqual((sent, batches[0]), (1, 40), batches)  # the forty in one request
        self.assertEqual(len(batches), 2, batches)  # the four in one more; the lone one on its own
        self.assertEqual([type(r).__name__ for r in refused], ["AsyncHandle", "BadRequest", "BadRequest", "AsyncHandle"])
        self.assertEqual(len({h.id for h in hs} | {refused[0].id, refused[3].id, lone.id}), 43)
        self.worker("together", {"square": square})
        self.assertEqual([ls.Handle(h.id, self.d).result(timeout=30) for h in hs], [i * i for i in range(40)])
        self.assertEqual([ls.Handle(h.id, self.d).result(timeout=30) for h in (refused[0], refused[3], lone)], [10000, 10609, 49])

    def test_a_sweep_refused_in_part_hands_back_the_async_handles_it_made(self):
        async def main():
            with self.assertRaises(ls.PayloadTooLarge) as e:
                await ls.AsyncQueue("sweep", self.d).map(square, ["a", "x" * (2 << 20), "c"])
            got = e.exception.handles
            self.assertEqual([type(h).__name__ for h in got], ["AsyncHandle", "NoneType", "AsyncHandle"])
            self.assertEqual((await got[0].get())["state"], "queued")

        asyncio.run(main())


class LocalPlane(Awaited, unittest.TestCase):
    def setUp(self):
        self.d = ls.Dispatch(":memory:")
        self.addCleanup(self.d.close)


@unittest.skipUnless(URL, "needs LAKESHORE_URL: run through `npm test -- python`, which starts wrangler dev")
class EdgePlane(Awaited, unittest.TestCase):
    def setUp(self):
        self.d = ls.HttpDispatch(URL, token=TOKEN, namespace="pyaio" + uuid.uuid4().hex[:10])
        self.addCleanup(self.d.close)


if __name__ == "__main__":
    unittest.main()
