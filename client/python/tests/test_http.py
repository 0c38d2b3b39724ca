"""HttpDispatch and run_worker against a real `wrangler dev` (LAKESHORE_URL, LAKESHORE_TOKEN),
plus interop with the Node CLI (LAKESHORE_NODE runs bin/lakeshore.mjs)."""
import asyncio
import json
import os
import queue
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
import uuid

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
sys.path.insert(0, os.path.dirname(__file__))

import lakeshore as ls  # noqa: E402
from support import (TempDirs, check_a_cancel_reaches_a_running_handler_within_moments,  # noqa: E402
                     check_a_newer_claim_outlives_an_older_attempts_answer, check_a_worker_says_who_it_is)

URL = os.environ.get("LAKESHORE_URL", "")
TOKEN = os.environ.get("LAKESHORE_TOKEN", "")
NODE = os.environ.get("LAKESHORE_NODE", "node")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
HANDLERS = os.path.join(ROOT, "test", "fixtures", "handlers.mjs")


def fresh_ns() -> str:
    return "py" + uuid.uuid4().hex[:12]


def client(ns: str = "") -> ls.HttpDispatch:
    return ls.HttpDispatch(URL, token=TOKEN, namespace=ns or fresh_ns())


def always_failing():
    """A handler that fails every time, and the list of its calls."""
    calls = []

    def flaky():
        calls.append(1)
        raise RuntimeError("attempt %d fails" % len(calls))

    return calls, flaky


def parked(d: ls.HttpDispatch, queue: str) -> int:
    """Claims waiting in the queue's object now (its stats)."""
    req = urllib.request.Request("%s/v1/ns/%s/queues/%s/stats" % (URL, d.namespace, queue), headers={"Authorization": "Bearer %s" % TOKEN})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return int(json.loads(resp.read())["waiters"])


def wait_until(check, what: str, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(0.01)


def node_cli(ns: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, LAKESHORE_URL=URL, LAKESHORE_TOKEN=TOKEN, LAKESHORE_NAMESPACE=ns)
    return subprocess.run([NODE, os.path.join(ROOT, "bin", "lakeshore.mjs"), *args], env=env, capture_output=True, text=True, timeout=timeout)


@unittest.skipUnless(URL, "needs LAKESHORE_URL: run through `npm test -- python`, which starts wrangler dev")
class Verbs(unittest.TestCase):
    def test_submit_claim_ack_result(self):
        d = client()
        self.assertEqual(d.submit("q", b"payload", id="a", priority=1.5), "a")
        self.assertEqual(d.count("q"), 1)
        c = d.claim("q", "w")
        self.assertEqual((c.id, c.envelope, c.attempt, c.queue), ("a", b"payload", 1, "q"))
        self.assertIsNone(d.claim("q", "w"))
        self.assertFalse(d.heartbeat("a", "w"))
        d.ack("a", "w", result=b"answer")
        self.assertEqual(d.result("a"), b"answer")
        row = d.get("a")
        self.assertEqual((row["state"], row["attempt"], row["worker_id"], row["result"], row["priority"]), ("succeeded", 1, "w", b"answer", 1.5))
        self.assertIsNone(d.get("missing"))
        self.assertEqual(d.count("q", "succeeded"), 1)

    def test_release_gives_back_unstarted_jobs_uncharged(self):
        d = client()
        d.submit("q", b"x", id="a")
        d.submit("q", b"x", id="b")
        self.assertEqual([c.id for c in d.claim_many("q", "w", 2)], ["a", "b"])
        self.assertEqual(d.release("q", "w", [{"id": "b"}]), ["b"])  # its attempt: the one this client claimed
        self.assertEqual(d.release("q", "w", [{"id": "b", "attempt": 1}]), [])  # not the worker's any more
        c = d.claim("q", "w")
        self.assertEqual((c.id, c.attempt, c.budget_attempt), ("b", 2, 1))
        with self.assertRaises(ls.BadRequest):
            d.release("q", "w", [{"id": "b", "attempt": -1}])
        self.assertEqual(d.get("b")["state"], "running")

    def test_a_newer_claim_outlives_an_older_attempts_answer(self):
        # A worker's threads share one client: a nack's answer read after the job's next claim
        # forgot that claim, and the thread holding it failed its first frame ("did not claim it").
        check_a_newer_claim_outlives_an_older_attempts_answer(
            self, client(), "_call", lambda method, path, *a, **k: path.split("?")[0].endswith("/nack"))

    def test_carries_the_newest_bookmark_the_plane_answered(self):
        # docs/contract.md, "Reads and replicas": sent back with each request, so a read sees this
        # client's own writes even from a replica; it grows with each write.
        d = client()
        self.assertIsNone(d._bookmark)
        d.submit("q", b"x", id="a")
        after_submit = d._bookmark
        self.assertRegex(after_submit or "", r"^DB(_\d+)?:[0-9A-Za-z-]+$")
        d.claim("q", "w")
        d.ack("a", "w", result=b"done")
        self.assertGreater(d._bookmark, after_submit)
        self.assertEqual(d._headers()["X-Lakeshore-Bookmark"], d._bookmark)
        self.assertEqual(d.get("a")["state"], "succeeded")

    def test_submits_of_many_threads_go_together_while_two_are_out(self):
        # A worker's handlers (a thread each) or a threaded server submitting to one queue: while two
        # requests are out, the others wait and go as one batch, each answered its own id or error.
        d = client()
        gate, batches, held = threading.Event(), [], {"first", "second"}
        real = d._call

        def call(method, path, body=None, *a, **k):
            if path.endswith("/invocations/batch"):
                batches.append([item["id"] for item in body["items"]])
            elif path.endswith("/invocations") and body["id"] in held:
                gate.wait(20)  # the two out, held until the rest wait behind them
            return real(method, path, body, *a, **k)

        d._call = call
        answers = {}

        def submit(inv_id, **opts):
            try:
                answers[inv_id] = d.submit("q", b"x", id=inv_id, **opts)
            except Exception as e:
                answers[inv_id] = e

        def lane():
            return d._lanes.get(("submit", "q"))

        def round_of(out, behind):
            gate.clear()
            threads = [threading.Thread(target=submit, args=(i,)) for i in out]
            for t in threads:
                t.start()
            wait_until(lambda: lane() is not None and lane()._out == 2, "two submits out")
            threads += [threading.Thread(target=submit, args=(i,), kwargs=opts) for i, opts in behind]
            for t in threads[2:]:
                t.start()
            wait_until(lambda: len(lane()._waiting) == len(behind), "the others waiting behind them")
            gate.set()
            for t in threads:
                t.join(20)

        # The plane refuses one (a budget of 0 attempts): it alone, the batch's others submitted.
        rest = ["t%d" % i for i in range(10)]
        round_of(["first", "second"], [(i, {"max_attempts": 0} if i == "t3" else {}) for i in rest])
        self.assertEqual(batches, [rest])  # one request for the ten
        self.assertIsInstance(answers.pop("t3"), ls.BadRequest)
        # The client refuses one before sending (a priority that is no number): each goes alone.
        held = {"third", "fourth"}
        round_of(["third", "fourth"], [("u0", {}), ("u1", {"priority": float("nan")}), ("u2", {})])
        self.assertEqual(len(batches), 1)
        self.assertIsInstance(answers.pop("u1"), ls.BadRequest)
        self.assertEqual(answers, {i: i for i in answers})
        self.assertEqual(d.count("q"), 15)

    def test_a_workers_threads_acks_go_together_each_with_its_next_job(self):
        # run_worker(concurrency=16): each thread acks its job and claims its next (ack_and_claim).
        # Those made while two are out go in one request: each its own ack's answer and one job.
        d = client()
        d.submit_many("q", [{"envelope": b"x", "id": "j%d" % i} for i in range(10)])
        held = {c.id: c for c in d.claim_many("q", "w", 5)}
        gate, requests = threading.Event(), []
        real = d._call

        def call(method, path, body=None, *a, **k):
            if path.endswith("/claim") and body.get("acks"):
                requests.append(([it["id"] for it in body["acks"]], body["max"]))
                if body["acks"][0]["id"] in ("j0", "j1"):
                    gate.wait(20)  # the two out, held until the rest wait behind them
            return real(method, path, body, *a, **k)

        d._call = call
        answers = {}

        def ack(inv_id, attempt=None):
            answers[inv_id] = d.ack_and_claim("q", "w", [{"id": inv_id, "result": b"r", "attempt": attempt or held[inv_id].attempt}], 1)

        threads = [threading.Thread(target=ack, args=(i,)) for i in ("j0", "j1")]
        for t in threads:
            t.start()
        key = ("ack_and_claim", "q", "w", "fifo", None)
        wait_until(lambda: key in d._lanes and d._lanes[key]._out == 2, "two acks out")
        # j3's attempt is not the one it holds: refused alone.
        threads += [threading.Thread(target=ack, args=args) for args in (("j2",), ("j3", 7), ("j4",))]
        for t in threads[2:]:
            t.start()
        wait_until(lambda: len(d._lanes[key]._waiting) == 3, "three acks waiting behind them")
        gate.set()
        for t in threads:
            t.join(20)
        self.assertEqual(sorted(requests[2:]), [(["j2", "j3", "j4"], 3)])  # one request for the three
        for inv_id in ("j0", "j1", "j2", "j4"):
            errors, got = answers[inv_id]
            self.assertEqual((errors, len(got)), ([None], 1), inv_id)
        errors, got = answers["j3"]
        self.assertIsInstance(errors[0], ls.FencingConflict)
        self.assertEqual(len(got), 1)
        taken = [c.id for _, got in answers.values() for c in got]
        self.assertEqual(sorted(taken), ["j5", "j6", "j7", "j8", "j9"])  # each job to one thread
        self.assertEqual(d.count("q", "succeeded"), 4)

    def test_submit_many_each_item_alone(self):
        d = client()
        d.submit("q", b"old", id="old", key="k-old")
        items = [{"envelope": b"e%d" % i, "id": "m%d" % i, "priority": i % 3} for i in range(1200)]
        items[5] = {"envelope": b"dup", "id": "again", "key": "k-old"}  # an existing key: answers the existing id
        items[7] = {"envelope": b"bad", "id": ""}  # refused alone
        out = d.submit_many("q", items)
        self.assertEqual(len(out), 1200)
        self.assertEqual(out[0], "m0")
        self.assertEqual(out[5], "old")
        self.assertIsInstance(out[7], ls.BadRequest)
        self.assertEqual(out[1199], "m1199")
        self.assertEqual(d.count("q"), 1 + 1198)  # the old one, and every item but the repeat and the refused
        self.assertEqual(d.claim("q", "w").priority, 2)  # highest priority first
        self.assertEqual(d.submit_many("q", items[:3]), ["m0", "m1", "m2"])  # resubmits are no-ops

    def test_submit_many_splits_by_size_too(self):
        d = client()
        mib = b"\x07" * (1 << 20)
        out = d.submit_many("q", [{"envelope": mib, "id": "big%d" % i} for i in range(36)])  # 48 MiB as base64
        self.assertEqual(out, ["big%d" % i for i in range(36)])
        self.assertEqual(d.count("q"), 36)

    def test_an_oversized_body_is_a_clean_413_not_a_broken_pipe(self):
        d = client()
        with self.assertRaises(ls.PayloadTooLarge):
            d.submit("q", b"x" * (40 << 20), id="huge")  # 53 MiB of JSON on a 4 MiB route
        self.assertIsNone(d.get("huge"))

    def test_nack_retry_and_fail(self):
        d = client()
        d.submit("q", b"x", id="a")
        d.claim("q", "w")
        d.nack("a", "w", error="flaky")
        self.assertEqual(d.get("a")["state"], "queued")
        self.assertEqual(d.claim("q", "w").attempt, 2)
        d.nack("a", "w", error={"message": "bad", "type": "ValueError"}, retry=False)
        with self.assertRaises(ls.InvocationFailed) as cm:
            d.result("a")
        self.assertEqual(cm.exception.error["type"], "ValueError")

    def test_nack_with_a_delay_and_the_attempt_budget(self):
        d = client()
        d.submit("q", b"x", id="a", max_attempts=2)
        d.claim("q", "w")
        self.assertEqual(d.nack("a", "w", error="later", delay=3600), "delayed")
        row = d.get("a")
        self.assertEqual(row["state"], "delayed")
        self.assertGreater(row["run_at"], time.time() * 1000 + 3500 * 1000)
        self.assertIsNone(d.claim("q", "w"))
        self.assertEqual(d.count("q", "delayed"), 1)

    def test_delay_ttl_retry(self):
        d = client()
        d.submit("q", b"x", id="later", delay=3600)
        d.submit("q", b"x", id="now", ttl=3600)
        self.assertEqual(d.get("later")["state"], "delayed")
        self.assertIsNotNone(d.get("now")["expires_at"])
        c = d.claim("q", "w")
        self.assertEqual(c.id, "now")  # the delayed one is not claimable
        self.assertEqual(d.nack("now", "w", error="bad", retry=False), "failed")
        with self.assertRaises(ls.FencingConflict):
            d.retry("later")  # only a failed job is retried
        d.retry("now")
        row = d.get("now")
        self.assertEqual((row["state"], row["attempt"]), ("queued", 1))
        self.assertEqual(d.claim("q", "w").attempt, 2)

    def test_operators_configure_pause_redrive_and_schedule(self):
        d = client()
        info = d.configure_queue("q", max_attempts=1, retry_backoff={"initial_ms": 100}, dead_letter_queue="dead")
        self.assertEqual(info["settings"]["max_attempts"], 1)
        self.assertEqual(info["settings"]["retry_backoff"]["factor"], 2)
        self.assertEqual(d.configure_queue("q", max_attempts=None)["settings"]["max_attempts"], None)  # None clears
        self.assertEqual(d.queue_info("q")["settings"]["dead_letter_queue"], "dead")  # left out: kept
        self.assertEqual(d.configure_queue("q", journal_retention_ms=3_600_000)["settings"]["journal_retention_ms"], 3_600_000)
        with self.assertRaises(ls.BadRequest):
            d.configure_queue("q", journal_retention_ms=-1)
        d.configure_queue("q", max_attempts=1)
        d.pause_queue("q")
        self.assertTrue(d.queue_info("q")["paused"])
        d.submit("q", b"x", id="a")
        self.assertIsNone(d.claim("q", "w"))
        d.resume_queue("q")
        d.claim("q", "w")
        self.assertEqual(d.nack("a", "w", error="boom"), "failed")  # one attempt: the budget is spent
        self.assertEqual(d.get("a")["error"]["type"], "AttemptsExhausted")
        self.assertEqual(d.count("dead"), 1)
        self.assertEqual(d.redrive("dead", dead_letters=True), [{"id": "a", "queue": "q"}])
        self.assertEqual(d.get("a")["state"], "queued")
        self.assertIn("dead", d.list_queues())
        s = d.set_schedule("q", "nightly", cron="0 3 * * *", timezone="Europe/Paris", envelope=b"tick")
        self.assertEqual((s["name"], s["envelope"], s["timezone"]), ("nightly", b"tick", "Europe/Paris"))
        self.assertGreater(s["next_at"], time.time() * 1000)
        self.assertEqual([x["name"] for x in d.list_schedules("q")], ["nightly"])
        with self.assertRaises(ls.BadRequest):
            d.set_schedule("q", "bad", cron="every day", envelope=b"")
        d.remove_schedule("q", "nightly")
        self.assertEqual(d.list_schedules("q"), [])
        # The Queue API's spelling, on this plane too: the call each tick submits.
        q = ls.SyncQueue("q", d)
        s = q.schedule_with({"timezone": "Europe/Paris"}, "weekly", "0 3 * * MON", "report", "eu", days=7)
        env = ls.decode_envelope(s["envelope"])
        self.assertEqual((env["fn"], env["args"], env["kwargs"], s["timezone"]), ("report", ["eu"], {"days": 7}, "Europe/Paris"))
        self.assertEqual([x["name"] for x in q.schedules()], ["weekly"])
        q.unschedule("weekly")
        self.assertEqual(q.schedules(), [])

    def test_views_of_more_queues_than_one_request_answers(self):
        # The plane answers 100 queues a request; the client follows the pages and answers the whole.
        d = client()
        names = ["p%03d" % i for i in range(103)]
        for q in names:
            d.submit(q, b"x", id="j-" + q)
        for q in ("p000", "p102"):
            d.claim(q, "w-pages", lease=60, worker={"host": "h", "pid": 1})
        self.assertEqual([x["queue"] for x in d.overview()], names)
        self.assertEqual(d.list_queues(), names)
        [w] = [w for w in d.workers() if w["worker_id"] == "w-pages"]
        self.assertEqual((w["queues"], w["host"], sorted(h["id"] for h in w["holding"])), (["p000", "p102"], "h", ["j-p000", "j-p102"]))
        text = d.metrics()
        self.assertEqual(len(re.findall(r'^lakeshore_jobs\{[^}]*state="queued"', text, re.M)), 103)
        self.assertEqual(text.count("# HELP lakeshore_jobs "), 1)
        self.assertIn('lakeshore_more_queues{namespace="%s"} 0' % d.namespace, text)
        # One page at a time: what a view of many queues reads.
        first = d.overview_page()
        self.assertEqual(([x["queue"] for x in first["queues"]], first["next"]), (names[:100], "p099"))
        rest = d.overview_page(after=first["next"])
        self.assertEqual(([x["queue"] for x in rest["queues"]], rest["next"]), (names[100:], None))
        two = d.overview_page(after="p050", limit=2)
        self.assertEqual(([x["queue"] for x in two["queues"]], two["next"]), (["p051", "p052"], "p052"))
        with self.assertRaises(ls.BadRequest):
            d.overview_page(limit=101)

    def test_overview_and_listing(self):
        d = client()
        for i in range(5):
            d.submit("q", b"x", id="j%d" % i, priority=i % 2)
        c = d.claim("q", "w")
        d.ack(c.id, "w")
        d.claim("q", "w")
        [q] = d.overview()
        self.assertEqual((q["queue"], q["counts"], q["paused"]), ("q", {"delayed": 0, "queued": 3, "running": 1, "succeeded": 1, "failed": 0, "cancelled": 0}, False))
        self.assertEqual((q["capped"], sum(q["recent"]["succeeded"]), len(q["recent"]["failed"])), ([], 1, 30))
        self.assertGreaterEqual(q["oldest_queued_ms"], 0)
        self.assertEqual(d.list_queues(), ["q"])
        # Those named only, in that order, twice if named twice; one that never held work, empty.
        named = d.overview(["never", "q", "q"])
        self.assertEqual([(x["queue"], x["counts"]["queued"]) for x in named], [("never", 0), ("q", 3), ("q", 3)])
        many = d.overview(["m%d" % i for i in range(150)])  # past 100 names: two requests
        self.assertEqual([x["queue"] for x in many], ["m%d" % i for i in range(150)])
        self.assertEqual(d.list_queues(), ["q"])  # asking about a queue does not make one
        seen, cursor = [], None
        while True:
            page = d.list("q", limit=3, cursor=cursor)
            seen += [j["id"] for j in page["items"]]
            cursor = page["cursor"]
            if cursor is None:
                break
        self.assertEqual(seen, ["j0", "j2", "j4"])  # claim order: the priority-1 jobs (j1, j3) were claimed
        self.assertNotIn("envelope", page["items"][0])
        self.assertEqual([j["id"] for j in d.list("q", state="running")["items"]], ["j3"])
        self.assertEqual([j["id"] for j in d.list("q", state="succeeded")["items"]], ["j1"])
        with self.assertRaises(ls.BadRequest):
            d.list("q", state="nope")

    def test_the_feed_tells_transitions_in_order_and_metrics_count_them(self):
        d = client()
        stop = threading.Event()
        seen: list = []
        reader = client(d.namespace)
        t = threading.Thread(target=lambda: [seen.append(r) for r in reader.events("f", stop=stop) if not stop.is_set()], daemon=True)
        t.start()
        # Attached once a probe's record arrives (bounded, probe by probe).
        for i in range(50):
            d.submit("f", b"x", id="probe%d" % i)
            try:
                wait_until(lambda: len(seen) > 0, "a probe's record", timeout=0.3)
                break
            except AssertionError:
                continue
        d.submit("f", b"x", id="a")
        d.cancel("a")
        wait_until(lambda: any(r.get("id") == "a" and r.get("status") == "cancelled" for r in seen), "a's records")
        stop.set()
        mine = [(r["id"], r["status"]) for r in seen if r.get("kind") == "job" and not r["id"].startswith("probe")]
        self.assertEqual(mine, [("a", "queued"), ("a", "cancelled")])
        text = d.metrics()
        self.assertIn('lakeshore_transitions_total{namespace="%s",queue="f",transition="cancelled"} 1' % d.namespace, text)
        self.assertIn("# TYPE lakeshore_jobs gauge", text)

    def test_the_namespace_wide_feed_tells_every_queue(self):
        d = client()
        d.submit("g1", b"x", id="old")  # g1 exists before the reader comes
        stop = threading.Event()
        seen: list = []
        reader = client(d.namespace)
        t = threading.Thread(target=lambda: [seen.append(r) for r in reader.events(kinds=["job"], stop=stop) if not stop.is_set()], daemon=True)
        t.start()
        for q in ("g1", "g2"):  # g2 starts while the reader is connected: joined within 2 s
            for i in range(60):
                d.submit(q, b"x", id="%s-probe%d" % (q, i))
                try:
                    wait_until(lambda: any(r.get("queue") == q for r in seen if r.get("kind") == "job"), "a probe of %s" % q, timeout=0.2)
                    break
                except AssertionError:
                    continue
        d.submit("g1", b"x", id="a")
        d.submit("g2", b"x", id="b")
        d.cancel("b")
        wait_until(lambda: any(r.get("id") == "b" and r.get("status") == "cancelled" for r in seen), "b's records")
        stop.set()
        mine = [(r["queue"], r["id"], r["status"]) for r in seen if r.get("kind") == "job" and "probe" not in r["id"]]
        # Each queue's records in its commit order (the queues interleave as their records arrive).
        self.assertEqual([m for m in mine if m[0] == "g1"], [("g1", "a", "queued")])
        self.assertEqual([m for m in mine if m[0] == "g2"], [("g2", "b", "queued"), ("g2", "b", "cancelled")])
        self.assertTrue(all(r["kind"] in ("job", "gap") for r in seen))
        with self.assertRaises(ls.BadRequest):
            next(iter(reader.events(kinds=["jobs"])))

    def test_journal_read_timeout_bounds_silence_not_the_stream(self):
        d = client()
        d.submit("q", b"x", id="live")
        d.claim("q", "w")

        def produce():
            for i in range(6):
                time.sleep(0.3)  # the producer's pace
                d.journal_append("live", i, ls.encode_frame(ls.VALUE, i, b"%d" % i), final=i == 5)

        threading.Thread(target=produce, daemon=True).start()
        seqs = [seq for seq, _ in d.journal_read("live", timeout=1.0)]  # a 1.8 s stream
        self.assertEqual(seqs, [0, 1, 2, 3, 4, 5])
        d.submit("q", b"x", id="silent")
        t0 = time.monotonic()
        with self.assertRaises(ls.Timeout):
            list(d.journal_read("silent", timeout=0.3))
        self.assertGreaterEqual(time.monotonic() - t0, 0.29)

    def test_the_contract_import_name_and_frame_kinds(self):
        import dreamlake.lakeshore as dl
        from dreamlake.lakeshore import FrameKind, HttpDispatch
        self.assertIs(dl, ls)
        self.assertIs(HttpDispatch, ls.HttpDispatch)
        kind, seq, body, _ = ls.decode_frame(ls.encode_frame(FrameKind.ERROR, 3, b"e"))
        self.assertIs(kind, FrameKind.ERROR)
        self.assertEqual((kind, seq, body), (4, 3, b"e"))

    def test_cancel(self):
        d = client()
        d.submit("q", b"x", id="a")
        self.assertTrue(d.cancel("a"))
        self.assertFalse(d.cancel("a"))
        with self.assertRaises(ls.InvocationCancelled):
            d.result("a")

    def test_idempotent_submit_on_key(self):
        d = client()
        self.assertEqual(d.submit("q", b"x", id="first", key="order-1"), "first")
        self.assertEqual(d.submit("q", b"y", id="second", key="order-1"), "first")
        self.assertEqual(d.count("q"), 1)

    def test_fencing_rejects_a_stale_worker(self):
        d = client()
        d.submit("q", b"x", id="a")
        d.claim("q", "A", lease=0.05)
        time.sleep(0.15)
        self.assertEqual(d.claim("q", "B").attempt, 2)
        for call in (lambda: d.ack("a", "A", result=b"stale"), lambda: d.nack("a", "A", error="stale"), lambda: d.heartbeat("a", "A")):
            with self.assertRaises(ls.FencingConflict):
                call()
        self.assertEqual(d.get("a")["worker_id"], "B")

    def test_errors_are_classes(self):
        d = client()
        with self.assertRaises(ls.BadRequest):
            d.submit("q", b"x", id="")
        with self.assertRaises(ls.BadRequest):
            d.submit("q", b"x", id="a", priority=float("nan"))
        with self.assertRaises(ls.NotFound):
            d.ack("ghost", "w")
        with self.assertRaises(ls.PayloadTooLarge):
            d.submit("q", b"x" * ((1 << 20) + 1), id="big")
        with self.assertRaises(ls.Unauthorized) as refused:
            ls.HttpDispatch(URL, token="wrong", namespace=d.namespace).count("q")
        self.assertNotIn("no token given", str(refused.exception))
        with self.assertRaises(ls.Unauthorized) as none:  # no token at all: it says where one goes
            ls.HttpDispatch(URL, token=None, namespace=d.namespace).count("q")
        self.assertIn("set LAKESHORE_TOKEN", str(none.exception))
        d.submit("q", b"x", id="slow")
        with self.assertRaises(ls.Timeout):
            d.result("slow", timeout=0.05)
        with self.assertRaises(TimeoutError):  # Timeout is also the builtin TimeoutError
            d.result("slow", timeout=0.05)


class Moves(unittest.TestCase):
    """A namespace's move to another shard (the root token's verb): the plane of these tests runs
    with two shards (scripts/test-python.mjs), each namespace on the one with the most room."""

    def test_moves_a_namespace_and_says_where_the_move_is(self):
        d = client()
        for i in range(30):
            d.submit("q", b"job %d" % i, id="j%d" % i)
        for i in range(10):
            c = d.claim("q", "w")
            d.journal_append(c.id, 0, ls.encode_frame(ls.VALUE, 0, b"frame of " + c.id.encode()))
            d.ack(c.id, "w", result=b"done " + c.id.encode())
        before = d.overview(["q"])[0]["counts"]
        here = d.storage()["shard"]
        there = "DB_1" if here == "DB" else "DB"
        seen = []
        m = d.move_namespace(there, on_progress=seen.append, wait=0.5)
        self.assertEqual((m["namespace"], m["from"], m["to"], m["state"], m["phase"]), (d.namespace, here, there, "moved", "ended"))
        self.assertEqual((m["jobs"], m["frames"]), (30, 10))
        self.assertIsNone(m["error"])
        self.assertTrue(all(s["state"] == "moving" for s in seen))
        # Where it lives now, and all of it there: counts, rows, results and journals.
        self.assertEqual(d.storage()["shard"], there)
        self.assertEqual(d.overview(["q"])[0]["counts"], before)
        first = d.get("j0")
        self.assertEqual((first["state"], first["result"]), ("succeeded", b"done j0"))
        self.assertEqual([f["body"] for f in d.journal_page("j0")["frames"]], [b"frame of j0"])
        self.assertEqual(d.claim("q", "w").id, "j10")
        self.assertEqual(d.move_status(), m)
        # Moved there already: refused, and it stays.
        with self.assertRaises(ls.FencingConflict):
            d.move_namespace(there)
        self.assertEqual(d.storage()["shard"], there)

    def test_shows_the_shards_and_the_namespaces_on_each(self):
        d = client()
        d.submit("q", b"x", id="a")
        shards = d.shards()
        self.assertEqual([s["shard"] for s in shards], ["DB", "DB_1"])
        for s in shards:
            self.assertEqual(sorted(s), ["bytes", "full", "high_water_bytes", "limit_bytes", "namespaces", "shard"])
            self.assertGreater(s["bytes"], 0)
            self.assertFalse(s["full"])
        here = d.storage()["shard"]
        self.assertGreaterEqual(next(s for s in shards if s["shard"] == here)["namespaces"], 1)
        on = d.shard_namespaces(here)
        self.assertIn({"namespace": d.namespace, "state": "active"}, [{k: n[k] for k in ("namespace", "state")} for n in on])
        self.assertEqual([n["namespace"] for n in on], sorted(n["namespace"] for n in on))
        elsewhere = "DB_1" if here == "DB" else "DB"
        self.assertNotIn(d.namespace, [n["namespace"] for n in d.shard_namespaces(elsewhere)])
        with self.assertRaises(ls.NotFound):
            d.shard_namespaces("DB_9")
        # A namespace's admin token is not the deployment's operator.
        admin = ls.HttpDispatch(URL, token=d._call("POST", "/tokens", {"role": "admin"})["token"], namespace=d.namespace)
        with self.assertRaises(ls.Forbidden):
            admin.shards()

    def test_move_status_of_a_namespace_never_moved_and_a_bad_wait(self):
        d = client()
        with self.assertRaises(ls.NotFound):
            d.move_status()
        with self.assertRaises(ls.BadRequest):
            d.move_status(wait=61)
        with self.assertRaises(ls.BadRequest):
            d.move_namespace("DB_99")


class PathSegments(unittest.TestCase):
    def test_an_id_or_name_no_url_can_carry_is_refused_before_anything_is_sent(self):
        # "." and ".." are resolved away in a URL's path (Cloudflare's edge normalizes so): sent,
        # `/invocations/../ack` would reach another route. Nothing listens on this port: a call
        # that got as far as sending would fail with Unavailable, not BadRequest.
        d = ls.HttpDispatch("http://127.0.0.1:9", token="t", namespace="n", retry_for=0)
        for bad in (".", ".."):
            calls = {
                "get": lambda: d.get(bad),
                "cancel": lambda: d.cancel(bad),
                "result": lambda: d.result(bad, timeout=0),
                "retry": lambda: d.retry(bad),
                "delete": lambda: d.delete(bad),
                "ack": lambda: d.ack(bad, "w", attempt=1),
                "nack": lambda: d.nack(bad, "w", error="x", attempt=1),
                "heartbeat": lambda: d.heartbeat(bad, "w", attempt=1),
                "journal_append": lambda: d.journal_append(bad, 0, ls.encode_frame(0, 0, b"x"), worker_id="w", attempt=1),
                "journal_page": lambda: d.journal_page(bad),
                "journal_read": lambda: list(d.journal_read(bad, timeout=0.1)),
                "journal_trim": lambda: d.journal_trim(bad),
                "stream_token": lambda: d.stream_token(bad),
                "worker_stopped": lambda: d.worker_stopped("q", bad),
                "worker_log": lambda: d.worker_log("q", bad, [{"id": "a", "level": "info", "message": "m"}]),
                "set_schedule": lambda: d.set_schedule("q", bad, cron="* * * * *", envelope=b"x"),
                "remove_schedule": lambda: d.remove_schedule("q", bad),
            }
            for verb, call in calls.items():
                with self.subTest(verb=verb, id=bad), self.assertRaises(ls.BadRequest) as cm:
                    call()
                self.assertIn("URLs resolve them away", str(cm.exception))


@unittest.skipUnless(URL, "needs LAKESHORE_URL")
class Retries(unittest.TestCase):
    def _token(self, ns: str, limits: dict) -> str:
        import urllib.request
        req = urllib.request.Request("%s/v1/ns/%s/tokens" % (URL, ns), method="POST", data=json.dumps({"role": "admin", "limits": limits}).encode(),
                                     headers={"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"})
        with urllib.request.urlopen(req) as r:
            return json.loads(r.read())["token"]

    def test_a_429_is_retried_after_its_retry_after(self):
        ns = fresh_ns()
        limited = self._token(ns, {"requests_per_second": 1, "request_burst": 1})
        d = ls.HttpDispatch(URL, token=limited, namespace=ns)
        self.assertEqual(d.count("q"), 0)
        t0 = time.monotonic()
        self.assertEqual(d.count("q"), 0)  # over budget: answered 429, retried after Retry-After
        self.assertGreaterEqual(time.monotonic() - t0, 0.5)
        with self.assertRaises(ls.RateLimited):
            ls.HttpDispatch(URL, token=limited, namespace=ns, retry_for=0).count("q")

    def test_an_unreachable_plane_is_retried_for_retry_for_then_raised(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens here
        d = ls.HttpDispatch("http://127.0.0.1:%d" % port, token=TOKEN, retry_for=0.4)
        t0 = time.monotonic()
        with self.assertLogs("lakeshore", "WARNING") as logs, self.assertRaises(ls.Unavailable) as cm:
            d.count("q")
        self.assertGreaterEqual(time.monotonic() - t0, 0.2)
        # Said at once, while retrying; then an error that names the plane and what to check.
        self.assertEqual(len(logs.records), 1)
        self.assertIn("cannot reach the plane at http://127.0.0.1:%d" % port, logs.output[0])
        self.assertIn("Is it running?", str(cm.exception))
        self.assertIsInstance(cm.exception, ConnectionError)


@unittest.skipUnless(URL, "needs LAKESHORE_URL")
class Waits(unittest.TestCase):
    def test_result_blocks_until_the_ack(self):
        d = client()
        d.submit("q", b"x", id="a")
        worker = client(d.namespace)

        def work():
            time.sleep(0.3)
            c = worker.claim("q", "w")
            worker.ack(c.id, "w", result=b"late")

        t = threading.Thread(target=work)
        t.start()
        t0 = time.monotonic()
        self.assertEqual(d.result("a", timeout=None), b"late")  # None: as long as the job takes
        self.assertGreater(time.monotonic() - t0, 0.25)
        t.join()

    def test_a_waiting_claim_is_answered_and_kept(self):
        d = client()
        got = []
        t = threading.Thread(target=lambda: got.append(d.claim("q", "w", wait=10)))
        t.start()
        wait_until(lambda: parked(d, "q") == 1, "the claim to park")
        d.submit("q", b"x", id="a")
        t.join(10)
        self.assertEqual(got[0].id, "a")
        time.sleep(0.5)  # past the streamed answer's tail: nothing gave the job back
        self.assertEqual((d.get("a")["state"], d.get("a")["attempt"]), ("running", 1))

    def test_cancel_claim_calls_off_a_waiting_claim(self):
        d = client()
        got = []
        t = threading.Thread(target=lambda: got.append(d.claim("q", "w", wait=20, claim_id="c1")))
        t.start()
        wait_until(lambda: parked(d, "q") == 1, "the claim to park")
        self.assertTrue(d.cancel_claim("q", "w", "c1"))
        t.join(5)
        self.assertEqual(got, [None])
        self.assertFalse(d.cancel_claim("q", "w", "c1"))  # nothing left to call off

    def test_claim_waits_for_a_submit(self):
        d = client()
        threading.Timer(0.3, lambda: client(d.namespace).submit("q", b"x", id="late")).start()
        c = d.claim("q", "w", wait=10)
        self.assertEqual(c.id, "late")

    def test_journal_read_is_live_and_ends_at_the_final_frame(self):
        d = client()
        d.submit("q", b"x", id="a")
        d.claim("q", "w")
        seen = []

        def read():
            for seq, frame in client(d.namespace).journal_read("a", timeout=20):
                seen.append((seq, ls.decode_frame(frame)))

        t = threading.Thread(target=read)
        t.start()
        for i in range(3):
            self.assertEqual(d.journal_append("a", i, ls.encode_frame(ls.VALUE, i, b"v%d" % i)), i)
            time.sleep(0.1)
        for _ in range(500):
            if len(seen) >= 3:
                break
            time.sleep(0.01)
        self.assertEqual([s for s, _ in seen], [0, 1, 2])  # arrived while the job runs
        self.assertEqual(d.journal_append("a", 2, ls.encode_frame(ls.VALUE, 2, b"v2")), 2)  # a retry is absorbed
        d.journal_append("a", 3, ls.encode_frame(ls.END, 3, b""), final=True)
        t.join(20)
        self.assertEqual([(s, f[0], f[2]) for s, f in seen], [(0, 0, b"v0"), (1, 0, b"v1"), (2, 0, b"v2"), (3, 3, b"")])

    def test_journal_read_resumes_after_dropped_connections(self):
        d = client()
        d.submit("q", b"x", id="a")
        d.claim("q", "w")
        proxy = CuttingProxy(URL, cuts=3)
        reader = ls.HttpDispatch(proxy.url, token=TOKEN, namespace=d.namespace)
        seen = []
        t = threading.Thread(target=lambda: seen.extend(s for s, _ in reader.journal_read("a", timeout=30)))
        t.start()
        for i in range(6):
            d.journal_append("a", i, ls.encode_frame(ls.VALUE, i, b"v"))
            time.sleep(0.08)
        d.journal_append("a", 6, ls.encode_frame(ls.END, 6, b""), final=True)
        t.join(30)
        proxy.close()
        self.assertEqual(proxy.cut, 3)
        self.assertEqual(seen, [0, 1, 2, 3, 4, 5, 6])

    def test_a_stream_token_reads_one_invocation_from_its_url_alone(self):
        d = client()
        d.submit("q", b'{"secret": 1}', id="a")
        d.submit("q", b"x", id="b")
        t = d.stream_token("a", ttl=60)
        self.assertTrue(t["url"].endswith("/invocations/a/journal?access_token=" + t["token"]))
        self.assertLess(abs(t["expires_at"] - (time.time() * 1000 + 60_000)), 30_000)
        d.cancel("a")
        # The URL alone (no Authorization header), as a browser's EventSource opens it.
        with urllib.request.urlopen(urllib.request.Request(t["url"], headers={"Accept": "text/event-stream"}), timeout=10) as resp:
            body = resp.read().decode()
        self.assertIn("id: end\nevent: end\n", body)
        # A reconnect after the end: 204, and journal_read ends on it too.
        req = urllib.request.Request(t["url"], headers={"Accept": "text/event-stream", "Last-Event-ID": "end"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            self.assertEqual(resp.status, 204)
        # It reads its one invocation, without the envelope, and nothing else.
        s = ls.HttpDispatch(URL, token=t["token"], namespace=d.namespace)
        row = s.get("a")
        self.assertEqual((row["state"], row["envelope"]), ("cancelled", None))
        self.assertIsNone(s.get("b"))
        with self.assertRaises(ls.Forbidden):
            s.submit("q", b"x", id="c")
        with self.assertRaises(ls.BadRequest):
            d.stream_token("a", ttl=2 * 86400)

    def test_trim_falls_back_to_the_row(self):
        d = client()
        d.submit("q", b"x", id="a")
        d.claim("q", "w")
        for i in range(4):
            d.journal_append("a", i, ls.encode_frame(ls.CHUNK, i, b"c"))
        d.ack("a", "w", result=b"whole")
        self.assertEqual(d.journal_trim("a", keep_last=1), 3)
        self.assertEqual([s for s, _ in d.journal_read("a")], [3])
        self.assertEqual(d.result("a"), b"whole")


OTEL_SCRIPT = r"""
import json, os, sys
import lakeshore as ls
from opentelemetry import trace
d = ls.HttpDispatch(os.environ["LAKESHORE_URL"], token=os.environ["LAKESHORE_TOKEN"], namespace=sys.argv[1])
q = ls.SyncQueue("q", dispatch=d)
tracer = trace.get_tracer("app")
with tracer.start_as_current_span("request") as root:
    q.submit_with({"id": "parent"}, "train")
seen = {}
def train():
    seen.setdefault("trace_id", ls.current_job().trace_id)
    if ls.current_job().id == "parent":
        q.submit_with({"id": "child"}, "train")  # inside the job's run span
    return 1
ls.run_worker(q, registry={"train": train}, once=True)
ls.run_worker(q, registry={"train": train}, once=True)
def ids(s):
    c = s.get_span_context()
    return {"name": s.name, "id": s.attributes.get("messaging.message.id"), "trace": "%032x" % c.trace_id, "span": "%016x" % c.span_id,
            "parent": "%016x" % s.parent.span_id if s.parent else None, "kind": s.kind.name if s.kind else None}
print(json.dumps({"root": ids(root), "spans": [ids(s) for s in getattr(trace, "FINISHED", [])], "job_trace": seen["trace_id"]}))
"""


@unittest.skipUnless(URL, "needs LAKESHORE_URL")
class Readme(unittest.TestCase):
    def test_every_python_snippet_of_the_readme_runs_verbatim_and_prints_what_it_says(self):
        with open(os.path.join(os.path.dirname(__file__), "..", "README.md"), encoding="utf-8") as f:
            # The push receiver is a server, not a script that prints: the next test runs it.
            blocks = [b for b in re.findall(r"```python\n(.*?)```", f.read(), re.S) if not b.startswith("# receiver.py")]
        self.assertGreaterEqual(len(blocks), 2)
        env = {**os.environ, "PYTHONPATH": os.path.join(os.path.dirname(__file__), ".."), "LAKESHORE_NAMESPACE": ""}
        for block in blocks:
            want = [m.group(1).strip() for m in re.finditer(r"^print\(.*\)\s+#\s*(.*)$", block, re.M)]
            out = subprocess.run([sys.executable, "-c", block], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(out.stdout.strip().splitlines(), want, block)


    def test_the_readmes_push_receiver_runs_verbatim_and_its_answer_is_the_jobs_result(self):
        with open(os.path.join(os.path.dirname(__file__), "..", "README.md"), encoding="utf-8") as f:
            source = next(b for b in re.findall(r"```python\n(.*?)```", f.read(), re.S) if b.startswith("# receiver.py"))
        with socket.socket() as s:  # the README's port, 8790, may be taken here: the one change
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        d = client()
        secret = d.configure_queue("hooks", push={"url": "http://127.0.0.1:%d/" % port, "rotate_secret": True})["settings"]["push"]["secret"]
        env = {**os.environ, "PYTHONPATH": os.path.join(os.path.dirname(__file__), ".."), "PUSH_SECRET": secret}
        receiver = subprocess.Popen([sys.executable, "-c", source.replace("8790", str(port))], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (receiver.kill(), receiver.wait(), receiver.stderr.close()))
        def listening() -> bool:
            with socket.socket() as c:
                return c.connect_ex(("127.0.0.1", port)) == 0
        wait_until(listening, "the receiver to listen")
        inv = d.submit("hooks", ls.encode_envelope("square", [9]), id="hook-1")
        self.assertEqual(json.loads(d.result(inv, timeout=30)), 81)
        # What the plane did not sign is refused, and says why.
        forged = urllib.request.Request("http://127.0.0.1:%d/" % port, data=b"{}", method="POST")
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(forged, timeout=10)
        self.assertEqual(e.exception.code, 401)
        self.assertIn("not a signed delivery", e.exception.read().decode())
        d.close()

@unittest.skipUnless(URL, "needs LAKESHORE_URL")
class FinishLater(unittest.TestCase):
    def _serve(self, handler) -> int:
        """Serves `handler` on loopback until the test ends; answers its port."""
        import http.server
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(lambda: (server.shutdown(), server.server_close()))
        return server.server_address[1]

    def _later_receiver(self, d: ls.HttpDispatch, q: str, **settings) -> "queue.Queue[dict]":
        """A push target for queue `q` that verifies each delivery, keeps it, and answers 202."""
        import http.server
        deliveries: "queue.Queue[dict]" = queue.Queue()
        secret = {}

        class Receiver(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                deliveries.put(ls.verify_delivery(secret["s"], self.headers, body))
                self.send_response(202)
                self.end_headers()

            def log_message(self, *args):
                pass

        port = self._serve(Receiver)
        secret["s"] = d.configure_queue(q, push={"url": "http://127.0.0.1:%d/" % port}, **settings)["settings"]["push"]["secret"]
        self.addCleanup(lambda: d.configure_queue(q, push=None))
        return deliveries

    def test_a_202_receiver_streams_values_live_and_acks_with_finish_later(self):
        d = client()
        self.addCleanup(d.close)
        deliveries = self._later_receiver(d, "slow-py", retry_backoff={"initial_ms": 0})
        h = ls.SyncQueue("slow-py", dispatch=d).submit("train", 3)
        job = ls.finish_later(deliveries.get(timeout=30), URL)
        self.assertEqual(d.get(h.id)["state"], "running")  # 202: the receiver's now
        seen: "queue.Queue[object]" = queue.Queue()
        reader = threading.Thread(target=lambda: [seen.put(v) for v in h.stream(timeout=30)], daemon=True)
        reader.start()
        for step in range(3):  # each value reaches the job's reader before the next is sent: live
            job.emit({"step": step})
            self.assertEqual(seen.get(timeout=30), {"step": step})
        self.assertFalse(job.heartbeat())
        job.ack({"loss": 0.25})
        reader.join(30)
        self.assertEqual(h.result(timeout=30), {"loss": 0.25})
        with self.assertRaisesRegex(TypeError, "already acked or nacked"):
            job.ack(1)
        # A nack with retry delivers it again, as attempt 2.
        h2 = ls.SyncQueue("slow-py", dispatch=d).submit("train", 4)
        self.assertEqual(ls.finish_later(deliveries.get(timeout=30), URL).nack(MemoryError("out of memory")), "queued")
        again = deliveries.get(timeout=30)
        self.assertEqual((again["id"], again["attempt"]), (h2.id, 2))
        ls.finish_later(again, URL).ack("ok")
        self.assertEqual(h2.result(timeout=30), "ok")
        with self.assertRaisesRegex(TypeError, "answer it with its outcome"):
            ls.finish_later({**again, "delivery_token": None}, URL)

    def test_an_asyncio_receiver_awaits_the_same_calls(self):
        d = client()
        self.addCleanup(d.close)
        deliveries = self._later_receiver(d, "async-py")
        h = ls.SyncQueue("async-py", dispatch=d).submit("train", 2)
        delivery = deliveries.get(timeout=30)

        async def receiver() -> str:
            job = ls.finish_later_async(delivery, URL)
            for step in range(2):
                await job.emit({"step": step})
            self.assertFalse(await job.heartbeat())
            await job.ack({"done": True})
            with self.assertRaisesRegex(TypeError, "already acked or nacked"):
                await job.ack(1)
            return job.id

        self.assertEqual(asyncio.run(receiver()), h.id)
        self.assertEqual(h.result(timeout=30), {"done": True})
        self.assertEqual(list(h.stream(timeout=30)), [{"step": 0}, {"step": 1}])

    def test_a_call_the_plane_never_had_may_be_made_again_and_sends_nothing_twice(self):
        import http.client
        import http.server
        import urllib.parse
        up = urllib.parse.urlsplit(URL)
        lost = {"when": lambda path: False}

        class Proxy(http.server.BaseHTTPRequestHandler):
            """Between the receiver and the plane: drops the requests lost["when"] picks, unforwarded."""
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if lost["when"](self.path):
                    self.close_connection = True
                    return
                c = http.client.HTTPConnection(up.hostname, up.port, timeout=30)
                c.request("POST", self.path, body, {k: v for k, v in self.headers.items() if k.lower() != "connection"})
                a = c.getresponse()
                data = a.read()
                self.send_response(a.status)
                for k, v in a.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                c.close()

            def log_message(self, *args):
                pass

        via = "http://127.0.0.1:%d" % self._serve(Proxy)
        d = client()
        self.addCleanup(d.close)
        deliveries = self._later_receiver(d, "flaky-py")
        h = ls.SyncQueue("flaky-py", dispatch=d).submit("train", 3)
        job = ls.finish_later(deliveries.get(timeout=30), via, retry_for=0.3)
        lost["when"] = lambda path: True  # the plane away: the first emit, its BEGIN frame, never arrives
        with self.assertRaises(Exception):
            job.emit(1)
        lost["when"] = lambda path: False
        job.emit(1)
        job.emit(2)
        lost["when"] = lambda path: path.endswith("/ack")  # the END frame arrives, the ack does not
        with self.assertRaises(Exception):
            job.ack("done")
        lost["when"] = lambda path: False
        job.ack("done")  # again: the job ends, its END not appended twice
        with self.assertRaisesRegex(TypeError, "already acked or nacked"):
            job.ack("done")
        self.assertEqual(h.result(timeout=30), "done")
        page = d.journal_page(h.id)
        self.assertEqual([f["kind"] for f in page["frames"]], [ls.BEGIN, ls.VALUE, ls.VALUE, ls.END])


@unittest.skipUnless(URL, "needs LAKESHORE_URL")
class Queues(TempDirs):
    """SyncQueue and the contract's run_worker(q, root=...)."""

    def test_a_function_submitted_by_reference_is_imported_under_the_workers_root(self):
        root = self.temp_dir("lakeshore-pyroot-")
        mod = "tasks_%s" % uuid.uuid4().hex[:8]
        with open(os.path.join(root, mod + ".py"), "w") as f:
            f.write("def add(a, b):\n    return a + b\n\ndef count(n):\n    for i in range(n):\n        yield i * i\n")
        q = ls.SyncQueue("refs", dispatch=client())
        h = q.submit("%s:add" % mod, 2, b=3)
        g = q.submit("%s:count" % mod, 4)
        # An HTTP plane imports nothing without a root: the registry alone.
        self.assertEqual(ls.run_worker(q, registry={"add": lambda a, b: a - b}, once=True), 1)
        self.assertEqual(h.result(timeout=10), -1)
        self.assertEqual(ls.run_worker(q, root=root, once=True), 1)
        self.assertEqual(list(g.stream(timeout=10)), [0, 1, 4, 9])
        self.assertEqual(g.result(timeout=10), None)
        self.assertNotIn(root, sys.path)
        # No root: the directory it started in, as the reference's default, confined to the modules found there.
        h2 = q.submit("%s:add" % mod, 1, 1)
        self.assertEqual(ls.run_worker(q, once=True), 1)  # started elsewhere: fails at once, saying why
        with self.assertRaises(ls.InvocationFailed) as cm:
            h2.result(timeout=10)
        self.assertIn("is not a module of this worker's directory", cm.exception.error["message"])
        self.assertEqual(q.dispatch.get(h2.id)["attempt"], 1)
        here = os.getcwd()
        os.chdir(root)
        try:
            h3 = q.submit("%s:add" % mod, 20, 22)
            self.assertEqual(ls.run_worker(q, once=True), 1)  # started in the module's directory: imported
            self.assertEqual(h3.result(timeout=10), 42)
            marker = os.path.join(root, "pwned")
            bad = q.submit("os:system", "touch %s" % marker)  # the standard library: never imported without a root
            self.assertEqual(ls.run_worker(q, once=True), 1)
            with self.assertRaises(ls.InvocationFailed) as cm:
                bad.result(timeout=10)
            self.assertIn("os is not a module of this worker's directory", cm.exception.error["message"])
            self.assertFalse(os.path.exists(marker))
        finally:
            os.chdir(here)
        self.assertNotIn(root, sys.path)

    def test_by_value_functions_run_only_where_allowed_and_under_the_runtime_policy(self):
        import platform
        import cloudpickle
        q = ls.SyncQueue("pickles", dispatch=client())
        marker = os.path.join(self.temp_dir("lakeshore-pickle-"), "ran")

        def touch(x):
            with open(marker, "a") as f:
                f.write("ran\n")
            return x * 2

        def submit(runtime=None):
            if runtime is None:
                return q.submit_with({"by_value": True}, touch, 21)
            env = ls.encode_envelope("touch", [21], extra={"pickled": __import__("base64").b64encode(cloudpickle.dumps(touch)).decode(), "runtime": runtime})
            return ls.Handle(q.dispatch.submit(q.name, env, id="p-%s" % uuid.uuid4().hex), q.dispatch)

        def outcome(h, **kw):
            self.assertEqual(ls.run_worker(q, once=True, retries=0, **kw), 1)
            try:
                return h.result(timeout=10)
            except ls.InvocationFailed as e:
                return e.error["message"]

        # An HTTP plane runs no pickle unless told to: refused, never unpickled.
        self.assertIn("does not run pickled functions", outcome(submit()))
        self.assertFalse(os.path.exists(marker))
        self.assertEqual(outcome(submit(), allow_pickled=True), 42)
        mine = {"python": platform.python_version(), "cloudpickle": cloudpickle.__version__}
        major, minor, _ = (platform.python_version_tuple())
        patch_off = {**mine, "python": "%s.%s.999" % (major, minor)}
        other_minor = {**mine, "python": "%s.%d.0" % (major, int(minor) + 1)}
        other_pickle = {**mine, "cloudpickle": "0.0.1"}
        cases = [
            ("strict", mine, 42), ("strict", patch_off, "runtime_policy 'strict'"), ("strict", other_pickle, "runtime_policy 'strict'"),
            ("minor", patch_off, 42), ("minor", other_pickle, 42), ("minor", other_minor, "runtime_policy 'minor'"),
            ("off", other_minor, 42),
        ]
        for policy, stamp, want in cases:
            got = outcome(submit(stamp), allow_pickled=True, runtime_policy=policy)
            if isinstance(want, str):
                self.assertIn(want, got, (policy, stamp))
            else:
                self.assertEqual(got, want, (policy, stamp))
        with open(marker) as f:
            self.assertEqual(f.read().count("ran"), 1 + sum(1 for _, _, w in cases if not isinstance(w, str)))
        with self.assertRaises(ValueError):
            ls.run_worker(q, once=True, runtime_policy="loose")


@unittest.skipUnless(URL, "needs LAKESHORE_URL")
class PushCode(TempDirs):
    def test_push_code_uploads_a_tree_once_and_refuses_uncommitted_changes(self):
        repo, git = self.git_repo({"pkg/tasks.py": "def train(x):\n    return 2 * x\n"})
        d = client()
        stamp = d.push_code(repo)
        self.assertEqual(stamp, git("rev-parse", "HEAD^{tree}"))
        self.assertEqual(d.push_code(repo), stamp)
        self.assertEqual(d.code_uploads, 1)  # the second push only asked
        with open(os.path.join(repo, "pkg", "tasks.py"), "w") as f:
            f.write("def train(x):\n    return 3 * x\n")
        with self.assertRaises(ls.BadRequest) as cm:
            d.push_code(repo)
        self.assertIn("commit them first", str(cm.exception))
        self.assertIn("(1 file(s), e.g. pkg/tasks.py)", str(cm.exception))  # named whole
        git("commit", "-qam", "two")
        self.assertNotEqual(d.push_code(repo), stamp)
        self.assertEqual(d.code_uploads, 2)


@unittest.skipUnless(URL, "needs LAKESHORE_URL")
class CodeMount(TempDirs):
    def test_a_daemon_in_an_empty_directory_runs_the_pushed_tree_of_each_job(self):
        repo, git = self.git_repo({"pkg/__init__.py": "", "pkg/tasks.py": "def train(x):\n    return 'v1:%d' % x\n"})
        d = client()
        q = ls.SyncQueue("py-mount", dispatch=d)
        old = q.submit_with({"code": "push", "code_dir": repo}, "pkg.tasks:train", 5)
        first = git("rev-parse", "HEAD^{tree}")
        empty, home = self.temp_dir("lakeshore-pyempty-"), self.temp_dir("lakeshore-pyhome-")
        env = {**os.environ, "LAKESHORE_HOME": home, "LAKESHORE_NAMESPACE": d.namespace, "PYTHONPATH": os.path.join(os.path.dirname(__file__), "..")}

        def daemon(*flags):
            r = subprocess.run([sys.executable, "-m", "lakeshore.daemon", "--queue", "py-mount", "--once", *flags], cwd=empty, env=env,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)

        daemon("--code", "mount")
        self.assertEqual(old.result(timeout=10), "v1:5")
        with open(os.path.join(repo, "pkg", "tasks.py"), "w") as f:
            f.write("def train(x):\n    return 'v2:%d' % x\n")
        git("commit", "-qam", "two")
        new = q.submit_with({"code": "push", "code_dir": repo}, "pkg.tasks:train", 6)
        stale = q.submit_with({"code": first}, "pkg.tasks:train", 7)
        daemon("--code", "mount")
        daemon("--code", "mount")
        self.assertEqual((new.result(timeout=10), stale.result(timeout=10)), ("v2:6", "v1:7"))
        self.assertEqual(sorted(n for n in os.listdir(os.path.join(home, "code")) if n.startswith(".")), [])
        refused = q.submit_with({"code": "push", "code_dir": repo}, "pkg.tasks:train", 8)
        daemon()  # no --code mount: the job fails at once, saying why
        with self.assertRaises(ls.InvocationFailed) as cm:
            refused.result(timeout=10)
        self.assertIn("does not run pushed code", cm.exception.error["message"])

    def test_a_hostile_archive_is_refused_and_writes_nothing_outside(self):
        import hashlib
        import io
        import tarfile
        from lakeshore.mount import Mounts, MountError
        d = client()
        outside = self.temp_dir("lakeshore-pyoutside-")
        for i, (name, kind, link) in enumerate([("../../escape.txt", tarfile.REGTYPE, ""), (outside + "/abs.txt", tarfile.REGTYPE, ""),
                                                ("link", tarfile.SYMTYPE, "../../../etc"), ("dev", tarfile.CHRTYPE, "")]):
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as t:
                info = tarfile.TarInfo(name)
                info.type, info.linkname = kind, link
                t.addfile(info, io.BytesIO(b"") if kind == tarfile.REGTYPE else None)
            data = buf.getvalue()
            stamp = str(i) * 40
            req = urllib.request.Request("%s/v1/ns/%s/code/%s" % (URL, d.namespace, stamp), data=data, method="PUT", headers={
                "Authorization": "Bearer %s" % TOKEN, "Content-Digest": "sha-256=:%s:" % __import__("base64").b64encode(hashlib.sha256(data).digest()).decode()})
            urllib.request.urlopen(req).close()
            home = self.temp_dir("lakeshore-pycode-")
            with self.assertRaises(MountError):
                Mounts(d.fetch_code, home).mount(stamp)
            self.assertEqual(os.listdir(home), [], name)
        self.assertEqual(os.listdir(outside), [])
        # A sound archive under a stamp that is not its tree: refused once unpacked, the unpacking removed.
        repo, git = self.git_repo({"pkg/tasks.py": "def f():\n    return 1\n"})
        data = subprocess.run(["git", "archive", "--format=tar", "HEAD^{tree}"], cwd=repo, check=True, capture_output=True).stdout
        req = urllib.request.Request("%s/v1/ns/%s/code/%s" % (URL, d.namespace, "9" * 40), data=data, method="PUT", headers={
            "Authorization": "Bearer %s" % TOKEN, "Content-Digest": "sha-256=:%s:" % __import__("base64").b64encode(hashlib.sha256(data).digest()).decode()})
        urllib.request.urlopen(req).close()
        home = self.temp_dir("lakeshore-pycode-")
        with self.assertRaises(MountError) as cm:
            Mounts(d.fetch_code, home).mount("9" * 40)
        self.assertIn("is the git tree %s" % git("rev-parse", "HEAD^{tree}"), str(cm.exception))
        self.assertEqual(os.listdir(home), [])


@unittest.skipUnless(URL, "needs LAKESHORE_URL")
class Traces(unittest.TestCase):
    def test_with_opentelemetry_a_job_runs_in_a_consumer_span_of_its_submitter_and_its_child_joins_the_trace(self):
        # opentelemetry is optional and its SDK not installable here (the machine's index lacks a dependency): a stand-in of the API calls
        # lakeshore makes (tests/otel_standin) records the spans.
        standin = os.path.join(os.path.dirname(__file__), "otel_standin")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([standin, os.path.join(os.path.dirname(__file__), "..")])}
        out = subprocess.run([sys.executable, "-c", OTEL_SCRIPT, fresh_ns()], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        got = json.loads(out.stdout)
        root, spans = got["root"], got["spans"]
        [enq_parent, enq_child] = [s for s in spans if s["name"] == "enqueue train"]
        run_parent = next(s for s in spans if s["name"] == "run train" and s["id"] == "parent")
        run_child = next(s for s in spans if s["name"] == "run train" and s["id"] == "child")
        self.assertEqual([s["kind"] for s in (enq_parent, run_parent, enq_child, run_child)], ["PRODUCER", "CONSUMER", "PRODUCER", "CONSUMER"])
        # request -> enqueue -> run -> enqueue (of the child, inside the run) -> run: one tree, one trace.
        self.assertEqual(enq_parent["parent"], root["span"])
        self.assertEqual(run_parent["parent"], enq_parent["span"])  # the envelope carried the PRODUCER span
        self.assertEqual(enq_child["parent"], run_parent["span"])
        self.assertEqual(run_child["parent"], enq_child["span"])
        self.assertEqual({root["trace"], run_parent["trace"], run_child["trace"], got["job_trace"]}, {root["trace"]})

    @unittest.skipUnless(__import__("importlib").util.find_spec("opentelemetry") and __import__("importlib").util.find_spec("opentelemetry.sdk"),
                         "opentelemetry-sdk is not installed: its dependency opentelemetry-semantic-conventions is on no index this machine reaches; the stand-in test covers the calls")
    def test_with_the_real_opentelemetry_sdk(self):
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        d = client()
        with trace.get_tracer("app").start_as_current_span("request") as root:
            d.submit("q", ls.encode_envelope("train"), id="p")
        ls.run_worker(d, "q", {"train": lambda: 1}, once=True)
        [run] = [s for s in exporter.get_finished_spans() if s.name == "run train"]
        self.assertEqual(run.kind, trace.SpanKind.CONSUMER)
        self.assertEqual(run.parent.span_id, root.get_span_context().span_id)
        self.assertEqual(run.context.trace_id, root.get_span_context().trace_id)


@unittest.skipUnless(URL, "needs LAKESHORE_URL")
class Worker(unittest.TestCase):
    def test_a_cancel_reaches_a_running_handler_within_moments_with_a_worker_token(self):
        # With the worker token a deployed worker holds, its pools naming the queue.
        d = client()
        req = urllib.request.Request("%s/v1/ns/%s/tokens" % (URL, d.namespace), method="POST",
                                     data=json.dumps({"role": "worker", "pools": ["prompt"]}).encode(),
                                     headers={"Authorization": "Bearer %s" % TOKEN, "Content-Type": "application/json"})
        with urllib.request.urlopen(req) as resp:
            token = json.loads(resp.read())["token"]
        check_a_cancel_reaches_a_running_handler_within_moments(self, d, ls.HttpDispatch(URL, token=token, namespace=d.namespace))

    def test_time_limit_ms_fails_a_job_that_runs_past_it(self):
        d = client()
        d.submit("q", ls.encode_envelope("slow", time_limit_ms=500), id="s")
        d.submit("q", ls.encode_envelope("steps", time_limit_ms=500), id="g")
        slept = threading.Event()

        def slow():
            time.sleep(3)  # the job's own work, past its limit
            slept.set()
            return "late"

        def steps():
            for i in range(10):
                time.sleep(0.2)
                yield i

        t0 = time.monotonic()
        for _ in range(2):
            ls.run_worker(d, "q", {"slow": slow, "steps": steps}, once=True, retries=0)
        self.assertLess(time.monotonic() - t0, 2.5)
        for inv in ("s", "g"):
            with self.assertRaises(ls.InvocationFailed) as cm:
                d.result(inv, timeout=10)
            self.assertEqual(cm.exception.error["type"], "TimeLimitExceeded")
        frames = [ls.decode_frame(f) for _, f in d.journal_read("g", timeout=5)]
        self.assertEqual([f[0] for f in frames][:1], [ls.BEGIN])
        self.assertLess(len([f for f in frames if f[0] == ls.VALUE]), 4)
        self.assertEqual(frames[-1][0], ls.ERROR)
        self.assertFalse(slept.is_set())

    def test_a_handlers_log_lines_go_to_stderr_and_the_feed_with_its_trace(self):
        import contextlib
        import io
        d = client()
        stop = threading.Event()
        seen: list = []
        reader = client(d.namespace)
        t = threading.Thread(target=lambda: [seen.append(r) for r in reader.events("lq", kinds=["worker"], stop=stop) if not stop.is_set()], daemon=True)
        t.start()
        # Attached once a probe line arrives (bounded, line by line).
        for i in range(50):
            d.worker_log("lq", "probe", [{"id": "probe", "level": "info", "message": "probe %d" % i}])
            try:
                wait_until(lambda: len(seen) > 0, "a probe line", timeout=0.3)
                break
            except AssertionError:
                continue
        tp = ls.new_traceparent()
        d.submit("lq", ls.encode_envelope("train", traceparent=tp), id="j")

        def train():
            ls.current_job().log("epoch 1 loss 0.5")
            ls.current_job().log("nan in grads", "warn")
            return 1

        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            ls.run_worker(d, "lq", {"train": train}, once=True)
        wait_until(lambda: any(r.get("message") == "nan in grads" for r in seen), "the job's lines")
        stop.set()
        lines = [(r["id"], r["level"], r["message"], r.get("trace_id")) for r in seen if r.get("id") == "j"]
        self.assertEqual(lines, [("j", "info", "epoch 1 loss 0.5", tp[3:35]), ("j", "warn", "nan in grads", tp[3:35])])
        self.assertIn("[lq/j] warn: nan in grads", err.getvalue())
        with self.assertRaises(RuntimeError):
            ls.current_job()
        with self.assertRaises(ls.BadRequest):
            d.worker_log("lq", "w", [{"id": "j", "level": "loud", "message": "x"}])

    def test_generator_streams_values_then_end(self):
        d = client()

        def count(n):
            for i in range(n):
                yield i
            return n

        d.submit("q", ls.encode_envelope("count", [3]), id="g")
        self.assertEqual(ls.run_worker(d, "q", {"count": count}, once=True), 1)
        frames = [ls.decode_frame(f) for _, f in d.journal_read("g", timeout=10)]
        self.assertEqual([f[0] for f in frames], [ls.BEGIN, ls.VALUE, ls.VALUE, ls.VALUE, ls.END])
        self.assertEqual([json.loads(f[2]) for f in frames if f[0] == ls.VALUE], [0, 1, 2])
        self.assertEqual(json.loads(d.result("g")), 3)

    def test_a_handler_writes_chunks_between_its_values(self):
        d = client()

        def talk(n):
            for i in range(n):
                for w in ("tok", "en%d " % i):
                    ls.current_job().write(w)
                yield i

        d.submit("q", ls.encode_envelope("talk", [2]), id="w")
        self.assertEqual(ls.run_worker(d, "q", {"talk": talk}, once=True), 1)
        shown = []  # a run of CHUNK frames as one: how writes group into frames is the writer's timing
        for kind, _, body, _ in (ls.decode_frame(f) for _, f in d.journal_read("w", timeout=10)):
            if kind == ls.CHUNK and shown and shown[-1][0] == ls.CHUNK:
                shown[-1] = (kind, shown[-1][1] + body)
            else:
                shown.append((kind, body))
        self.assertEqual(shown, [(ls.BEGIN, b""), (ls.CHUNK, b"token0 "), (ls.VALUE, b"0"), (ls.CHUNK, b"token1 "), (ls.VALUE, b"1"),
                                 (ls.END, b"")])

    def test_a_queue_maps_a_function_over_its_arguments(self):
        d = client()
        q = ls.SyncQueue("sweep", d)
        handles = q.map("mul", [1, 2, 3], [4, 5, 6])
        while ls.run_worker(q, registry={"mul": lambda a, b: a * b}, once=True, once_wait=0.2):
            pass
        self.assertEqual([h.result(timeout=10) for h in handles], [4, 10, 18])

    def test_failures_retry_while_attempt_within_retries(self):
        d = client()
        calls, flaky = always_failing()
        d.submit("q", ls.encode_envelope("flaky"), id="f")
        stop = threading.Event()
        t = threading.Thread(target=ls.run_worker, args=(d, "q", {"flaky": flaky}), kwargs={"retries": 1, "stop": stop}, daemon=True)
        t.start()
        with self.assertRaises(ls.InvocationFailed) as cm:
            d.result("f", timeout=20)
        stop.set()
        t.join(10)
        self.assertEqual(len(calls), 2)
        self.assertEqual(d.get("f")["attempt"], 2)
        self.assertEqual(cm.exception.error["type"], "RuntimeError")
        kinds = [ls.decode_frame(f)[0] for _, f in d.journal_read("f", timeout=5)]
        self.assertEqual(kinds, [ls.ERROR, ls.ERROR])

    def test_the_plane_budget_decides_retries_and_an_unknown_function_fails_at_once(self):
        d = client()
        calls, flaky = always_failing()
        d.submit("q", ls.encode_envelope("flaky"), id="f")
        d.submit("q", ls.encode_envelope("nobody"), id="n")
        ran = [ls.run_worker(d, "q", {"flaky": flaky}, once=True, retries=None) for _ in range(4)]
        self.assertEqual(ran, [1, 1, 1, 1])  # f three times (the default budget), n once
        self.assertEqual(len(calls), 3)
        # The contract's default, retries=1, lowers the budget to two attempts.
        d.submit("q", ls.encode_envelope("flaky"), id="f2")
        self.assertEqual([ls.run_worker(d, "q", {"flaky": flaky}, once=True) for _ in range(2)], [1, 1])
        self.assertEqual((d.get("f2")["state"], d.get("f2")["attempt"], len(calls)), ("failed", 2, 5))
        with self.assertRaises(ls.InvocationFailed) as cm:
            d.result("f", timeout=5)
        self.assertEqual((cm.exception.error["type"], cm.exception.error["last"]["type"]), ("AttemptsExhausted", "RuntimeError"))
        self.assertEqual((d.get("n")["state"], d.get("n")["attempt"]), ("failed", 1))
        t0 = time.monotonic()
        self.assertEqual(ls.run_worker(d, "q", {}, once=True, once_wait=0.5), 0)  # an empty queue: it returns
        self.assertLess(time.monotonic() - t0, 10)

    def test_on_done_sees_outcomes_and_a_handled_failure_is_not_retried(self):
        d = client()
        d.submit("q", ls.encode_envelope("charge", origin="order-77"), id="bad")
        d.submit("q", ls.encode_envelope("ok", origin="order-78"), id="good")
        seen = []

        def on_done(job, outcome):
            # A success is told once the plane has the result: the job is succeeded when on_done hears it.
            state = d.get(job["id"])["state"] if outcome["state"] == "succeeded" else outcome["state"]
            seen.append("%s:%s:%s" % (job["fn"], state, job["origin"]))
            return "handled" if outcome["state"] == "failed" else None

        def charge():
            raise RuntimeError("card declined")

        for _ in range(2):
            ls.run_worker(client(d.namespace), "q", {"charge": charge, "ok": lambda: "fine"}, once=True, on_done=on_done)
        self.assertEqual(sorted(seen), ["charge:failed:order-77", "ok:succeeded:order-78"])
        row = d.get("bad")
        self.assertEqual((row["state"], row["attempt"]), ("failed", 1))  # not retried: handled

    def test_a_worker_says_who_it_is_and_that_it_stopped(self):
        check_a_worker_says_who_it_is(self, client())

    def test_a_stopped_worker_calls_off_its_waiting_claim(self):
        d = client()
        stop = threading.Event()
        t = threading.Thread(target=ls.run_worker, args=(d, "q", {}), kwargs={"stop": stop}, daemon=True)
        t.start()
        wait_until(lambda: parked(d, "q") == 1, "the worker's claim to park")
        stop.set()
        t.join(10)
        self.assertFalse(t.is_alive())
        wait_until(lambda: parked(d, "q") == 0, "the claim to leave", 2)
        d.submit("q", b"x", id="after")
        self.assertEqual(d.claim("q", "other", wait=5).attempt, 1)  # the stopped worker never took it

    def test_a_stop_as_its_claim_is_answered_leaves_the_job_to_whoever_has_it_and_raises_nothing(self):
        # The stop watcher calls the waiting claim off as its answer comes back, so the plane puts
        # the job back, and another worker claims it. The stopping worker, giving it back too,
        # finds it no longer its own: that is no error (run_worker raised FencingConflict, "nack
        # refused: ... held by attempt 2 ... of another worker", and a worker of concurrency 16
        # stopped every thread with it).
        d = client()
        stop = threading.Event()
        real_claim = d.claim
        other = []

        def claim(queue, worker_id, **k):
            c = real_claim(queue, worker_id, **k)
            if c is not None and not stop.is_set():
                stop.set()
                d.cancel_claim(queue, worker_id, k["claim_id"])  # as the stop watcher does (it may be first)
                other.append(real_claim(queue, "other", wait=5))
            return c

        d.claim = claim
        d.submit("q", b"x", id="job")
        self.assertEqual(ls.run_worker(d, "q", {}, stop=stop), 0)
        self.assertEqual((other[0].id, other[0].attempt), ("job", 2))
        row = d.get("job")
        self.assertEqual((row["state"], row["worker_id"], row["attempt"]), ("running", "other", 2))


@unittest.skipUnless(URL, "needs LAKESHORE_URL")
class Install(unittest.TestCase):
    def test_pip_installs_offline_into_a_venv_and_the_readme_example_runs(self):
        with tempfile.TemporaryDirectory(prefix="lakeshore-venv-") as tmp:
            venv = os.path.join(tmp, "venv")
            subprocess.run([sys.executable, "-m", "venv", venv], check=True, capture_output=True, timeout=120)
            py = os.path.join(venv, "bin", "python")
            # --no-index: nothing may come from an index, not even a build backend.
            r = subprocess.run([py, "-m", "pip", "install", "--no-index", os.path.join(ROOT, "client", "python")],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(os.path.join(ROOT, "client", "python", "README.md"), encoding="utf-8") as f:
                example = re.search(r"```python\n(.*?)```", f.read(), re.S).group(1)
            # Run from elsewhere, so `import lakeshore` finds the installed package, not the source tree.
            r = subprocess.run([py, "-c", example], cwd=tmp, capture_output=True, text=True, timeout=60,
                               env=dict(os.environ, LAKESHORE_URL=URL, LAKESHORE_TOKEN=TOKEN, PYTHONPATH=""))
            self.assertEqual(r.stderr, "")
            self.assertEqual(r.stdout, "[0, 1, 2]\n3\n")
            where = subprocess.run([py, "-c", "import lakeshore; print(lakeshore.__file__)"], cwd=tmp, capture_output=True, text=True)
            self.assertIn(os.path.join(venv, "lib"), where.stdout)


@unittest.skipUnless(URL, "needs LAKESHORE_URL")
class Interop(unittest.TestCase):
    def test_node_producer_python_worker(self):
        ns = fresh_ns()
        sub = node_cli(ns, "submit", "jobs", "count", "[3]")
        self.assertEqual(sub.returncode, 0, sub.stderr)
        inv = sub.stdout.strip()

        def count(n):
            for i in range(n):
                yield i * 10
            return "done"

        d = client(ns)
        tail = subprocess.Popen([NODE, os.path.join(ROOT, "bin", "lakeshore.mjs"), "--json", "tail", inv], env=dict(os.environ, LAKESHORE_URL=URL, LAKESHORE_TOKEN=TOKEN, LAKESHORE_NAMESPACE=ns), stdout=subprocess.PIPE, text=True)
        self.assertEqual(ls.run_worker(d, "jobs", {"count": count}, once=True), 1)
        out, _ = tail.communicate(timeout=30)
        values = [json.loads(l)["body"] for l in out.splitlines() if json.loads(l)["kind"] == "VALUE"]
        self.assertEqual(values, [0, 10, 20])  # the Node tail saw the Python worker's frames
        res = node_cli(ns, "--json", "result", inv)
        self.assertEqual(json.loads(res.stdout)["result"], "done")

    def test_python_producer_node_worker(self):
        d = client()
        d.submit("jobs", ls.encode_envelope("count", [3, 50]), id="n1")
        worker = subprocess.Popen([NODE, os.path.join(ROOT, "bin", "lakeshore.mjs"), "worker", "once", "--queue", "jobs", "--module", HANDLERS],
                                  env=dict(os.environ, LAKESHORE_URL=URL, LAKESHORE_TOKEN=TOKEN, LAKESHORE_NAMESPACE=d.namespace), stderr=subprocess.DEVNULL)
        frames = [ls.decode_frame(f) for _, f in d.journal_read("n1", timeout=30)]
        self.assertEqual([json.loads(f[2]) for f in frames if f[0] == ls.VALUE], [0, 1, 2])  # Node's frames, read by Python
        self.assertEqual(json.loads(d.result("n1", timeout=30)), 3)
        self.assertEqual(worker.wait(30), 0)
        d.submit("jobs", ls.encode_envelope("add", [2, 3]), id="n2")
        self.assertEqual(node_cli(d.namespace, "worker", "once", "--queue", "jobs", "--module", HANDLERS).returncode, 0)
        self.assertEqual(json.loads(d.result("n2")), 5)


class CuttingProxy:
    """A loopback TCP proxy that cuts the first `cuts` connections right after forwarding a frame event."""

    def __init__(self, upstream: str, cuts: int):
        host, port = upstream.split("//")[1].split(":")
        self.up = (host, int(port))
        self.left = cuts
        self.cut = 0
        self.lock = threading.Lock()
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.url = "http://127.0.0.1:%d" % self.srv.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self.srv.accept()
            except OSError:
                return
            up = socket.create_connection(self.up)
            threading.Thread(target=self._pump, args=(down, up, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, down, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, watch: bool) -> None:
        seen = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                seen += data
                if watch and b"event: frame" in seen:
                    with self.lock:
                        if self.left > 0:
                            self.left -= 1
                            self.cut += 1
                            break
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.srv.close()


if __name__ == "__main__":
    unittest.main()
