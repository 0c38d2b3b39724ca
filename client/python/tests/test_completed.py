"""as_completed (lakeshore/completed.py) on the local plane and, with LAKESHORE_URL, on a real
`wrangler dev`: handles as their jobs end, in the order they end, a thread a thousand jobs."""
import json
import os
import sys
import threading
import unittest
import uuid

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
sys.path.insert(0, os.path.abspath(os.path.dirname(__file__)))

import lakeshore as ls  # noqa: E402
from support import wait_until  # noqa: E402
import lakeshore.completed as completed  # noqa: E402

URL = os.environ.get("LAKESHORE_URL", "")
TOKEN = os.environ.get("LAKESHORE_TOKEN", "")


def square(x):
    return x * x


def results_threads():
    return [t for t in threading.enumerate() if t.name == "lakeshore-results"]


class Completed:
    """The tests, on the plane `self.d` (a subclass's)."""

    d = None

    def held(self, queue, n):
        """n jobs of `queue` submitted and claimed by the test: they end when it says."""
        hs = ls.SyncQueue(queue, self.d).map(square, range(n))
        got = self.d.claim_many(queue, "w1", n) if n <= 1000 else None
        if got is None:
            got = []
            while len(got) < n:
                got += self.d.claim_many(queue, "w1", min(1000, n - len(got)))
        self.assertEqual(len(got), n)
        return hs

    def ack(self, h, value):
        self.d.ack(h.id, "w1", result=json.dumps(value).encode())

    def test_handles_come_as_their_jobs_end_and_answer_from_what_the_wait_brought(self):
        hs = self.held("ends", 4)
        order = [hs[2], hs[0], hs[3], hs[1]]
        self.ack(order[0], "c")
        seen = []
        for h in ls.as_completed(hs, timeout=30):
            seen.append(h)
            # Each job ends once the one before it was yielded.
            if len(seen) == 1:
                self.d.nack(order[1].id, "w1", error={"message": "no such city"}, retry=False)
            elif len(seen) == 2:
                self.d.cancel(order[2].id)
            elif len(seen) == 3:
                self.ack(order[3], {"d": 4})
        self.assertEqual([h.id for h in seen], [h.id for h in order])
        # Each handle answers its first result() from the wait: the job deleted since, it still says
        # how it ended; asked again, it asks the plane, which no longer has it.
        self.d.delete(order[0].id)
        self.assertEqual(order[0].result(), "c")
        with self.assertRaises(ls.NotFound):
            order[0].result(timeout=0)
        with self.assertRaises(ls.InvocationFailed) as e:
            order[1].result()
        self.assertIn("no such city", str(e.exception))
        with self.assertRaises(ls.InvocationCancelled):
            order[2].result()
        self.assertEqual(order[3].result(), {"d": 4})
        wait_until(lambda: not results_threads(), lambda: "the calls' threads to end (%d)" % len(results_threads()))

    def test_a_thousand_jobs_of_a_queue_are_one_call(self):
        hs = self.held("sweep", 1200)
        for h in hs[:600]:
            self.ack(h, h.id)
        it = ls.as_completed(hs, timeout=60)
        first = [next(it) for _ in range(600)]
        # 1,200 jobs of one queue: two calls out (1,000 jobs and 200), not a thread a job.
        self.assertEqual(len(results_threads()), 2)
        self.assertEqual({h.id for h in first}, {h.id for h in hs[:600]})
        for h in hs[600:]:
            self.ack(h, h.id)
        rest = list(it)
        self.assertEqual(sorted(h.id for h in first + rest), sorted(h.id for h in hs))
        self.assertEqual([h.result() for h in first + rest], [h.id for h in first + rest])
        wait_until(lambda: not results_threads(), lambda: "the calls' threads to end (%d)" % len(results_threads()))

    def test_a_wait_past_its_timeout_raises_and_leaves_no_thread(self):
        hs = self.held("slow", 3)
        self.ack(hs[1], 1)
        it = ls.as_completed(hs, timeout=0.5)
        self.assertIs(next(it), hs[1])
        with self.assertRaises(ls.Timeout) as e:
            next(it)
        self.assertIn("2 of the jobs", str(e.exception))
        wait_until(lambda: not results_threads(), lambda: "the calls' threads to end (%d)" % len(results_threads()), timeout=5)
        self.assertEqual(self.d.get(hs[0].id)["state"], "running")  # giving up a wait is not cancelling a job

    def test_a_loop_left_early_leaves_no_thread_behind(self):
        before = completed.SLICE
        completed.SLICE = 0.2
        self.addCleanup(setattr, completed, "SLICE", before)
        hs = self.held("left", 3)
        self.ack(hs[0], 0)
        for h in ls.as_completed(hs):
            self.assertIs(h, hs[0])
            break
        wait_until(lambda: not results_threads(), lambda: "the calls' threads to end (%d)" % len(results_threads()), timeout=5)

    def test_handles_of_bare_ids_and_of_many_queues(self):
        a = ls.SyncQueue("qa", self.d).submit(square, 2)
        b = ls.SyncQueue("qb", self.d).submit(square, 3)
        bare = ls.Handle(b.id, self.d)  # no queue: looked up
        missing = ls.Handle("never-%s" % uuid.uuid4().hex[:8], self.d)
        self.d.claim("qa", "w1")
        self.d.claim("qb", "w1")
        self.ack(a, 4)
        self.ack(b, 9)
        got = list(ls.as_completed([missing, a, bare, b], timeout=30))
        self.assertIs(got[0], missing)  # known at once: the plane has no such job
        self.assertEqual({id(h) for h in got}, {id(missing), id(a), id(bare), id(b)})
        with self.assertRaises(ls.NotFound):
            missing.result()
        self.assertEqual((a.result(), bare.result(), b.result()), (4, 9, 9))
        self.assertEqual(list(ls.as_completed([])), [])


class LocalPlane(Completed, unittest.TestCase):
    def setUp(self):
        self.d = ls.Dispatch(":memory:")
        self.addCleanup(self.d.close)


@unittest.skipUnless(URL, "needs LAKESHORE_URL: run through `npm test -- python`, which starts wrangler dev")
class EdgePlane(Completed, unittest.TestCase):
    def setUp(self):
        self.d = ls.HttpDispatch(URL, token=TOKEN, namespace="pydone" + uuid.uuid4().hex[:10])
        self.addCleanup(self.d.close)


if __name__ == "__main__":
    unittest.main()
