"""The Python client's two planes have one set of verbs: `Dispatch` (the local plane) and
`HttpDispatch` take the same calls with the same keywords, and the verbs a worker batches with
(claim_many, ack_and_claim), the holder's own attempt and the journal's page answer alike on both,
on the local plane and, with LAKESHORE_URL, on a real `wrangler dev`."""
import inspect
import os
import sys
import tempfile
import unittest
import uuid

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import lakeshore as ls  # noqa: E402


def square(x):
    return x * x

URL = os.environ.get("LAKESHORE_URL", "")
TOKEN = os.environ.get("LAKESHORE_TOKEN", "")

#: What one plane has and the other has not, and why.
ONLY_HTTP = {
    "cancel_claim": "a local claim looks again every `poll` seconds; its caller stops it by giving it a short wait",
    "push_code": "code transport: a local plane runs this machine's code already",
    "fetch_code": "code transport, the worker's side",
    "stream_token": "streaming to browsers: a local plane serves no browser",
    "move_namespace": "shards: a local plane is one SQLite file",
    "move_status": "shards: a local plane is one SQLite file",
    "shards": "shards: a local plane is one SQLite file",
    "shard_namespaces": "shards: a local plane is one SQLite file",
}
ONLY_LOCAL = {
    "journal_follow": "journal_read's frames with their attempts, for the local worker; HTTP reads them from its stream",
    "book": "the local plane's worker book, which the edge plane keeps in its queue object",
    "touch": "the local plane's worker book: a worker heard",
}


def public(cls):
    return {m for m in dir(cls) if not m.startswith("_") and callable(getattr(cls, m))}


class OneSetOfVerbs(unittest.TestCase):
    def test_both_planes_take_the_same_calls_with_the_same_keywords(self):
        http, local = public(ls.HttpDispatch), public(ls.Dispatch)
        self.assertEqual(http - local, set(ONLY_HTTP), "verbs only the HTTP client has")
        self.assertEqual(local - http, set(ONLY_LOCAL), "verbs only the local plane has")
        differ = []
        for verb in sorted(http & local):
            a, b = inspect.signature(getattr(ls.HttpDispatch, verb)), inspect.signature(getattr(ls.Dispatch, verb))
            shape = lambda s: [(p.name, p.kind, p.default) for p in s.parameters.values()]  # noqa: E731
            if shape(a) != shape(b):
                differ.append("%s: HttpDispatch%s, Dispatch%s" % (verb, a, b))
        self.assertEqual(differ, [])


class Verbs:
    """The tests, on the planes `self.d` and `self.other` (a second client of the same namespace)."""

    d = other = None

    def test_a_worker_claims_many_and_acks_with_its_next_claim(self):
        q = "batch"
        ids = [self.d.submit(q, ls.encode_envelope("f", [i]), id="b%d-%s" % (i, uuid.uuid4().hex[:6])) for i in range(5)]
        got = self.d.claim_many(q, "w1", 3)
        self.assertEqual([c.id for c in got], ids[:3])
        self.assertEqual([c.attempt for c in got], [1, 1, 1])
        stale = {"id": ids[0], "attempt": 7}
        answers, more = self.d.ack_and_claim(q, "w1", [{"id": ids[1], "result": b"1"}, stale, {"id": ids[2]}], 10)
        self.assertEqual(answers[0], None)
        self.assertIsInstance(answers[1], ls.FencingConflict)  # each ack fenced on its own
        self.assertEqual(answers[2], None)
        self.assertEqual([c.id for c in more], ids[3:])
        self.assertEqual(self.d.result(ids[1], timeout=0), b"1")
        self.assertEqual(self.d.get(ids[0])["state"], "running")
        with self.assertRaises(ls.BadRequest):
            self.d.claim_many(q, "w1", 1001)
        with self.assertRaises(ls.BadRequest):  # bad claim arguments refuse the whole call, its acks too
            self.d.ack_and_claim(q, "w1", [{"id": ids[0]}], 0)
        self.assertEqual(self.d.get(ids[0])["state"], "running")
        self.assertEqual(self.d.claim_many("empty", "w1", 5, wait=0.05), [])

    def test_an_ack_and_claim_of_more_acks_than_one_request_holds_acks_them_all(self):
        q = "many-acks"
        hs = ls.SyncQueue(q, self.d).map(square, range(1201))
        got = []
        while len(got) < 1200:
            got += self.d.claim_many(q, "w1", min(1000, 1200 - len(got)))
        answers, more = self.d.ack_and_claim(q, "w1", [{"id": c.id, "result": b"%d" % i} for i, c in enumerate(got)], 5)
        self.assertEqual(answers, [None] * 1200)
        self.assertEqual([c.id for c in more], [hs[1200].id])
        self.assertEqual(self.d.count(q, "succeeded"), 1200)
        self.assertEqual(self.d.result(got[1199].id, timeout=0), b"1199")

    def test_another_client_acts_for_the_holder_with_its_attempt(self):
        q = "held"
        inv = self.d.submit(q, ls.encode_envelope("f", []), id="h-%s" % uuid.uuid4().hex[:8])
        first = self.d.claim(q, "w1", lease=0.001)
        self.assertEqual(first.attempt, 1)
        again = None
        while again is None:  # the first lease ran out: the job is claimed again, attempt 2
            again = self.d.claim(q, "w1", wait=1.0)
        self.assertEqual((again.id, again.attempt), (inv, 2))
        # A client that claimed nothing names the holder and its attempt: a stale one is refused.
        with self.assertRaises(ls.FencingConflict):
            self.other.heartbeat(inv, "w1", attempt=1)
        self.assertFalse(self.other.heartbeat(inv, "w1", attempt=2, lease=60))
        until, cancelled = self.other.heartbeat_lease(inv, "w1", attempt=2, lease=120)
        self.assertFalse(cancelled)
        self.assertEqual(self.other.get(inv)["lease_until"], until)
        frame = ls.encode_frame(ls.FrameKind.VALUE, 0, b"7", None)
        with self.assertRaises(ls.FencingConflict):
            self.other.journal_append(inv, 0, frame, worker_id="w1", attempt=1)
        self.assertEqual(self.other.journal_append(inv, 0, frame, worker_id="w1", attempt=2), 0)
        with self.assertRaises(ls.BadRequest):  # neither claimed here nor named
            self.other.journal_append(inv, 1, frame)
        with self.assertRaises(ls.FencingConflict):
            self.other.ack(inv, "w1", attempt=1, result=b"no")
        self.other.ack(inv, "w1", attempt=2, result=b"42", queue=q)
        self.assertEqual(self.d.result(inv, timeout=0), b"42")
        page = self.other.journal_page(inv)
        self.assertEqual([(f["seq"], f["kind"], f["attempt"], f["body"]) for f in page["frames"]], [(0, ls.FrameKind.VALUE, 2, b"7")])
        self.assertEqual((page["done"], page["state"], page["outcome"]), (True, "succeeded", {"state": "succeeded", "result": b"42"}))
        self.assertEqual(self.other.journal_page(inv, since=0)["frames"], [])

    def test_nack_names_its_attempt_and_a_wrong_queue_finds_nothing(self):
        inv = self.d.submit("nq", ls.encode_envelope("f", []), id="n-%s" % uuid.uuid4().hex[:8])
        c = self.d.claim("nq", "w1")
        with self.assertRaises(ls.FencingConflict):
            self.other.nack(inv, "w1", error="boom", attempt=c.attempt + 1)
        with self.assertRaises(ls.NotFound):
            self.other.ack(inv, "w1", attempt=c.attempt, queue="not-its-queue")
        self.assertEqual(self.other.nack(inv, "w1", error="boom", attempt=c.attempt, retry=False), "failed")

    def test_many_rows_at_once_in_the_order_asked(self):
        self.d.submit("ga", ls.encode_envelope("f", []), id="a")
        self.d.submit("gb", ls.encode_envelope("f", []), id="b")
        self.d.claim("gb", "w1")
        rows = self.other.get_many(["b", "nope", "a", "b"])
        self.assertEqual([r and (r["id"], r["queue"], r["state"], r["attempt"], r["worker_id"]) for r in rows],
                         [("b", "gb", "running", 1, "w1"), None, ("a", "ga", "queued", 0, None), ("b", "gb", "running", 1, "w1")])
        self.assertNotIn("envelope", rows[0])
        self.assertEqual(rows[2], self.d.list("ga")["items"][0])  # as a listing shows it
        for bad in ([], [""], ["j%d" % i for i in range(1001)], [7]):
            with self.assertRaises(ls.BadRequest):
                self.d.get_many(bad)

    def test_an_overview_of_the_queues_named(self):
        self.d.submit("ov-a", ls.encode_envelope("f", []), id="o-%s" % uuid.uuid4().hex[:8])
        got = self.d.overview(["never-used", "ov-a"])
        self.assertEqual([q["queue"] for q in got], ["never-used", "ov-a"])
        self.assertEqual(got[0]["counts"], {s: 0 for s in ("delayed", "queued", "running", "succeeded", "failed", "cancelled")})
        self.assertEqual(got[1]["counts"]["queued"], 1)
        for q in got:
            self.assertEqual(set(q) >= {"queue", "paused", "settings", "counts", "capped", "oldest_queued_ms", "recent", "pushing"}, True, q)
            self.assertEqual(len(q["recent"]["succeeded"]), 30)
        self.assertEqual(self.d.configure_queue("ov-a", max_attempts=3)["settings"]["max_attempts"], 3)
        with self.assertRaises(TypeError):
            self.d.configure_queue("ov-a", max_attempt=3)  # a misspelt setting, on either plane


class LocalPlane(Verbs, unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        path = os.path.join(tmp.name, "d.sqlite")
        self.d, self.other = ls.Dispatch(path), ls.Dispatch(path)
        self.addCleanup(self.d.close)
        self.addCleanup(self.other.close)


@unittest.skipUnless(URL, "needs LAKESHORE_URL: run through `npm test -- python`, which starts wrangler dev")
class EdgePlane(Verbs, unittest.TestCase):
    def setUp(self):
        ns = "pyverbs" + uuid.uuid4().hex[:10]
        self.d, self.other = ls.HttpDispatch(URL, token=TOKEN, namespace=ns), ls.HttpDispatch(URL, token=TOKEN, namespace=ns)
        self.addCleanup(self.d.close)
        self.addCleanup(self.other.close)


if __name__ == "__main__":
    unittest.main()
