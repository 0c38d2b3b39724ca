"""The Python local plane (lakeshore.Dispatch) on SQLite, and its SQL: the core's, from sql.json.
Python↔Node on one file, both ways and racing, lives in test/node/python-local.test.ts."""
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
sys.path.insert(0, os.path.dirname(__file__))

import lakeshore as ls  # noqa: E402
from support import (TempDirs, wait_until, check_a_cancel_reaches_a_running_handler_within_moments,  # noqa: E402
                     check_a_newer_claim_outlives_an_older_attempts_answer, check_a_worker_says_who_it_is)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


class LocalPlane(unittest.TestCase):
    def setUp(self):
        self.d = ls.Dispatch(":memory:")

    def tearDown(self):
        self.d.close()

    def test_the_contract_verbs_with_their_guards(self):
        d = self.d
        self.assertEqual(d.submit("q", b"x", id="a", key="k"), "a")
        self.assertEqual(d.submit("q", b"y", id="b", key="k"), "a")  # the key answers the first
        self.assertEqual(d.count("q"), 1)
        c = d.claim("q", "w", kind="priority")
        self.assertEqual((c.id, c.attempt, c.queue, c.envelope), ("a", 1, "q", b"x"))
        self.assertIsNone(d.claim("q", "w2"))
        self.assertEqual(d.journal_append("a", None, ls.encode_frame(ls.VALUE, 0, b"1")), 0)
        self.assertEqual(d.journal_append("a", 5, ls.encode_frame(ls.VALUE, 5, b"5")), 5)
        self.assertEqual(d.journal_append("a", 5, ls.encode_frame(ls.VALUE, 5, b"5")), 5)  # a retry: absorbed
        with self.assertRaises(ls.FencingConflict):
            d.journal_append("a", 3, ls.encode_frame(ls.VALUE, 3, b"3"))  # behind the last seq
        self.assertFalse(d.heartbeat("a", "w"))
        with self.assertRaises(ls.FencingConflict):
            d.ack("a", "intruder")
        d.ack("a", "w", result=b"done")
        d.ack("a", "w", result=b"done")  # a repeat: absorbed
        self.assertEqual(d.result("a"), b"done")
        self.assertEqual([(s, ls.decode_frame(f)[0]) for s, f in d.journal_read("a")], [(0, ls.FrameKind.VALUE), (5, ls.FrameKind.VALUE)])
        self.assertEqual(d.journal_trim("a", keep_last=1), 1)
        self.assertEqual([s for s, _ in d.journal_read("a")], [5])
        self.assertEqual(d.get("a")["state"], "succeeded")
        self.assertIsNone(d.get("nope"))
        with self.assertRaises(ls.NotFound):
            d.cancel("nope")

    def test_the_attempt_budget_fails_a_job_once_spent(self):
        d = self.d
        d.submit("q", b"x", id="f")
        states = []
        for _ in range(3):
            c = d.claim("q", "w")
            states.append(d.nack(c.id, "w", error={"message": "boom", "type": "E"}))
        self.assertEqual(states, ["queued", "queued", "failed"])
        with self.assertRaises(ls.InvocationFailed) as cm:
            d.result("f", timeout=1)
        self.assertEqual((cm.exception.error["type"], cm.exception.error["last"]["message"]), ("AttemptsExhausted", "boom"))

    def test_a_pushers_nack_waits_the_push_backoff_where_its_queue_sets_none(self):
        # A Node `lakeshore push` may push from this file: its nacks wait as on every plane.
        d = self.d
        d.submit("hooks", b"x", id="p")
        c = d.claim("hooks", "lakeshore-push")
        before = int(time.time() * 1000)
        self.assertEqual(d.nack(c.id, "lakeshore-push", error="push target answered 503"), "delayed")
        wait = d.get("p")["run_at"] - before
        self.assertTrue(9_000 <= wait <= 11_000 + 1_000, wait)
        d.submit("hooks", b"x", id="w")
        self.assertEqual(d.nack(d.claim("hooks", "gpu-1").id, "gpu-1", error="boom"), "queued")  # any other worker: none
        d.configure_queue("hooks", retry_backoff={"initial_ms": 0})
        d.submit("hooks", b"x", id="q")
        c = d.claim("hooks", "lakeshore-push")
        while c.id != "q":
            c = d.claim("hooks", "lakeshore-push")
        self.assertEqual(d.nack("q", "lakeshore-push", error="503"), "queued")  # the queue's own, 0, wins

    def test_delays_ttl_and_waiting_claims(self):
        d = self.d
        d.submit("q", b"x", id="later", delay=0.3)
        self.assertEqual(d.count("q", "delayed"), 1)
        self.assertIsNone(d.claim("q", "w"))
        t0 = time.monotonic()
        c = d.claim("q", "w", wait=5)  # it comes due while the claim waits
        self.assertEqual(c.id, "later")
        self.assertGreaterEqual(time.monotonic() - t0, 0.2)
        d.submit("q", b"x", id="stale", ttl=0.05)
        time.sleep(0.1)  # its TTL runs out
        self.assertIsNone(d.claim("q", "w"))
        self.assertEqual(d.get("stale")["error"]["type"], "Expired")

    def test_a_cancelled_job_tells_its_worker_at_the_next_heartbeat(self):
        d = self.d
        d.submit("q", b"x", id="c")
        d.claim("q", "w")
        self.assertTrue(d.cancel("c"))
        self.assertFalse(d.cancel("c"))
        self.assertTrue(d.heartbeat("c", "w"))
        with self.assertRaises(ls.InvocationCancelled):
            d.result("c", timeout=1)

    def test_sync_queue_and_run_worker_on_the_local_plane_run_by_value_functions(self):
        q = ls.SyncQueue("gpu", dispatch=self.d)
        h = q.submit_with({"by_value": True}, lambda x: x * 3, 14)
        g = q.submit_with({"by_value": True}, lambda n: (i for i in range(n)), 3)
        self.assertEqual(ls.run_worker(q, once=True), 1)
        self.assertEqual(ls.run_worker(q, once=True), 1)
        self.assertEqual(h.result(timeout=5), 42)
        self.assertEqual(list(g.stream(timeout=5)), [0, 1, 2])

    def test_cron_schedules_fire_on_the_local_plane(self):
        # The conformance suite runs the schedule tests on this plane too; here: what a Python user sees.
        d = self.d
        s = d.set_schedule("tick", "each-second", cron="* * * * * *", envelope=b"t", timezone="europe/berlin")
        self.assertEqual(s["timezone"], "Europe/Berlin")  # canonical, as the Node planes store it
        job = d.claim("tick", "w", wait=5)
        self.assertIsNotNone(job)
        self.assertRegex(job.id, r"^schedule:tick:each-second:\d+000$")
        self.assertEqual(job.envelope, b"t")
        with self.assertRaises(ls.BadRequest):
            d.set_schedule("tick", "bad", cron="0 0 * * FRI-MON", envelope=b"x")  # croner refuses a backwards range
        with self.assertRaises(ls.NotFound):
            d.remove_schedule("tick", "nope")

    def test_an_http_plane_without_a_url_says_what_a_url_is(self):
        # Said at construction, not retried as an outage nor an AttributeError of None.
        for url, shown in ((None, "None"), ("127.0.0.1:8787", "'127.0.0.1:8787'"), ("ftp://h", "'ftp://h'")):
            with self.assertRaises(ls.BadRequest) as e:
                ls.HttpDispatch(url)
            self.assertEqual(str(e.exception), "the plane's URL must be http(s)://host[:port], not %s" % shown)

    def test_a_handle_streams_a_job_that_waits_in_its_queue_past_the_reads_default_bound(self):
        # Handle.stream() with no timeout has no bound: a job queued behind others for minutes is
        # streamed once it runs. The journal's clock jumps an hour once the stream has waited.
        from lakeshore import journal
        q = ls.SyncQueue("waits", self.d)
        h = q.submit("count", 2)

        class Clock:
            skew = 0.0

            def monotonic(self):
                return time.monotonic() + self.skew

            def sleep(self, s):
                self.skew = 3600.0
                time.sleep(s)
        clock = Clock()
        saved, journal.time = journal.time, clock
        got, failed = [], []

        def read():
            try:
                got.extend(h.stream())
            except Exception as e:  # noqa: BLE001 - said below
                failed.append(e)
        t = threading.Thread(target=read)
        try:
            t.start()
            deadline = time.time() + 5
            while clock.skew == 0.0 and time.time() < deadline:
                time.sleep(0.01)

            def count(n):
                yield from range(n)
            ls.run_worker(q, registry={"count": count}, once=True)
            t.join(10)
        finally:
            journal.time = saved
        self.assertEqual(failed, [])
        self.assertEqual(got, [0, 1])

    def test_a_handler_writes_raw_output_as_few_chunk_frames_in_order_before_what_follows(self):
        q = ls.SyncQueue("chat", self.d)
        n = 2000

        def talk():
            job = ls.current_job()
            for i in range(n):
                job.write("t%d " % i)  # a token at a time, as a model streams them
                if i % 100 == 99:
                    time.sleep(0.002)
            return "done"

        def mixed():
            job = ls.current_job()
            job.write("a")
            yield 1
            job.write(b"b")
            job.write("c")
            yield 2
            job.write("d")  # after the last value: still before END

        h, g = q.submit(talk), q.submit(mixed)
        for _ in range(2):
            self.assertEqual(ls.run_worker(q, registry={"talk": talk, "mixed": mixed}, once=True), 1)
        self.assertEqual(h.result(timeout=10), "done")
        frames = [ls.decode_frame(f) for _, f in self.d.journal_read(h.id, timeout=5)]
        chunks = [body for kind, _, body, _ in frames if kind == ls.CHUNK]
        self.assertEqual(b"".join(chunks).decode(), "".join("t%d " % i for i in range(n)))  # every byte, in order
        self.assertLess(len(chunks), n // 10)  # coalesced: a frame per few milliseconds, not per write
        self.assertEqual(list(g.stream(timeout=10)), [1, 2])
        shown = []  # a run of CHUNK frames as one: how writes group into frames is the writer's timing
        for kind, _, body, _ in (ls.decode_frame(f) for _, f in self.d.journal_read(g.id, timeout=5)):
            if kind == ls.CHUNK and shown and shown[-1][0] == ls.CHUNK:
                shown[-1] = (kind, shown[-1][1] + body)
            else:
                shown.append((kind, body))
        self.assertEqual(shown, [(ls.BEGIN, b""), (ls.CHUNK, b"a"), (ls.VALUE, b"1"), (ls.CHUNK, b"bc"), (ls.VALUE, b"2"),
                                 (ls.CHUNK, b"d"), (ls.END, b"")])

        def bad():
            try:
                ls.current_job().write(5)
            except TypeError as e:
                return str(e)
        b = q.submit(bad)
        ls.run_worker(q, registry={"bad": bad}, once=True)
        self.assertEqual(b.result(timeout=10), "write takes str or bytes, got int")

    def test_chunk_frames_of_written_text_each_decode_alone(self):
        from lakeshore.chunks import ChunkWriter, whole_chars
        sent = []
        w = ChunkWriter(sent.append, max_bytes=8, window_s=0.0)
        text = "a\u00e9\u20ac\U0001F600" * 20  # 1, 2, 3 and 4 bytes a character
        w.write(text)
        w.flush()
        self.assertGreater(len(sent), 10)
        self.assertTrue(all(len(b) <= 8 for b in sent))
        self.assertEqual("".join(b.decode("utf-8") for b in sent), text)  # each frame decodes alone (strict)
        self.assertEqual(whole_chars(bytes([0x80]) * 20, 8), 8)  # bytes that are no UTF-8: cut at the limit
        self.assertEqual(whole_chars("abcdefg\u20ac".encode(), 8), 7)

    def test_every_chunk_a_plain_function_wrote_is_in_the_journal_before_its_ack(self):
        # Appends made slow: the handler returns while its chunk is still on its way.
        d = self.d
        real = d.journal_append

        def slow(*a, **k):
            time.sleep(0.05)
            return real(*a, **k)
        d.journal_append = slow
        q = ls.SyncQueue("slow-chunks", d)

        def say():
            ls.current_job().write("hello")
            ls.current_job().write(" world")
            return 1
        h = q.submit(say)
        ls.run_worker(q, registry={"say": say}, once=True)
        d.journal_append = real
        self.assertEqual(h.result(timeout=10), 1)
        frames = [ls.decode_frame(f) for _, f in d.journal_read(h.id, timeout=5)]
        self.assertEqual(b"".join(body for kind, _, body, _ in frames if kind == ls.CHUNK), b"hello world")

    def test_a_handle_waits_for_its_result_as_long_as_the_job_takes(self):
        # No bound unless given one (a training run takes hours): the plane is asked with timeout=None.
        asked = []

        class Plane:
            def result(self, inv_id, timeout):
                asked.append(timeout)
                return b"42"

            def journal_read(self, inv_id, timeout):
                return iter(())
        h = ls.Handle("job", Plane())
        self.assertEqual((h.result(), h.result(timeout=5)), (42, 42))
        list(h.stream())  # no END in the journal: the row says how it ended
        self.assertEqual(asked, [None, 5, None])
        # And the planes take None as that: here the local one (test_http: the HTTP one).
        q = ls.SyncQueue("unbounded", self.d)
        done = q.submit("answer")
        ls.run_worker(q, registry={"answer": lambda: 42}, once=True)
        self.assertEqual((done.result(), json.loads(self.d.result(done.id, timeout=None))), (42, 42))

    def test_a_handler_hears_it_should_stop_when_cancelled_or_past_its_time_limit(self):
        # Python cannot stop a thread: a long handler checks current_job().stop, and is told why.
        q = ls.SyncQueue("stops", self.d)
        heard = {}

        def train(name):
            job = ls.current_job()
            while not job.stop.wait(0.02):
                pass
            heard[name] = job.stop_reason
            return "stopped"

        cancelled = q.submit(train, "cancelled")
        t = threading.Thread(target=lambda: ls.run_worker(q, registry={"train": train}, once=True, lease=0.6), daemon=True)
        t.start()
        deadline = time.time() + 5
        while cancelled.get()["state"] != "running" and time.time() < deadline:
            time.sleep(0.01)
        cancelled.cancel()
        t.join(10)
        self.assertEqual(heard.get("cancelled"), "the invocation was cancelled")
        self.assertEqual(cancelled.get()["state"], "cancelled")
        late = q.submit_with({"time_limit_ms": 200, "max_attempts": 1}, train, "late")
        ls.run_worker(q, registry={"train": train}, once=True)
        deadline = time.time() + 5
        while "late" not in heard and time.time() < deadline:
            time.sleep(0.01)
        self.assertEqual(heard.get("late"), "the job ran past its time limit of 200 ms, the job's own")
        with self.assertRaises(ls.InvocationFailed):
            late.result(timeout=5)

    def test_a_handler_that_never_reads_stop_is_interrupted_and_frees_its_slot(self):
        # A plain loop, an async handler and a generator, none reading current_job().stop: each is
        # stopped when its job is cancelled (its finally runs), and the worker's one slot takes
        # the next job. Past a time limit the same.
        q = ls.SyncQueue("interrupts", self.d)
        ended, began = {}, {}

        def spin(name):
            began[name] = True
            try:
                n = 0
                while True:  # with a body: CPython 3.11 raises at an empty loop's jump outside its try
                    n += 1
            finally:
                ended[name] = ls.current_job().stop_reason

        async def waits(name):
            began[name] = True
            try:
                await asyncio.sleep(60)
            finally:
                ended[name] = ls.current_job().stop_reason

        def counts(name):
            began[name] = True
            try:
                n = 0
                while True:
                    n += 1
                    if n % 100_000 == 0:
                        yield n
            finally:
                ended[name] = ls.current_job().stop_reason

        stop = threading.Event()
        registry = {"spin": spin, "waits": waits, "counts": counts, "fine": lambda: "next"}
        # A daemon: a handler the worker fails to stop (the bug this test is for) must not keep the
        # test's process alive after its failure is said.
        t = threading.Thread(target=lambda: ls.run_worker(q, registry=registry, lease=0.6, stop=stop), daemon=True)
        t.start()
        try:
            for fn in ("spin", "waits", "counts"):
                h = q.submit(fn, fn)
                deadline = time.time() + 5
                while fn not in began and time.time() < deadline:
                    time.sleep(0.01)
                h.cancel()
                self.assertEqual(q.submit("fine").result(timeout=10), "next", fn)
                self.assertEqual(ended.get(fn), "the invocation was cancelled", fn)
                self.assertEqual(h.get()["state"], "cancelled")
            late = q.submit_with({"time_limit_ms": 200, "max_attempts": 1}, "spin", "late")
            with self.assertRaises(ls.InvocationFailed):
                late.result(timeout=10)
            deadline = time.time() + 5
            while "late" not in ended and time.time() < deadline:
                time.sleep(0.01)
            self.assertEqual(ended.get("late"), "the job ran past its time limit of 200 ms, the job's own")
        finally:
            stop.set()
            t.join(10)

    def test_a_cancel_reaches_a_running_handler_within_moments_not_at_its_heartbeat(self):
        check_a_cancel_reaches_a_running_handler_within_moments(self, self.d, self.d)

    def test_a_worker_logs_each_attempts_outcome_and_why(self):
        q = ls.SyncQueue("outcomes", self.d)

        def flaky(n):
            if ls.current_job().attempt < 2:
                raise ValueError("not yet %d" % n)
            return n

        fine, retried = q.submit("flaky", 0), q.submit_with({"max_retries": 1}, "flaky", 1)
        registry = {"flaky": flaky}
        with self.assertLogs("lakeshore.worker", level="INFO") as said:
            ls.run_worker(q, registry=registry, once=True)  # fine's first attempt fails, and is retried
            ls.run_worker(q, registry=registry, once=True)
            ls.run_worker(q, registry=registry, once=True)
            ls.run_worker(q, registry=registry, once=True)
        lines = [r.getMessage() for r in said.records]
        self.assertIn("job %s attempt 1 failed: ValueError: not yet 0; it will be retried (queued)" % fine.id, lines)
        self.assertIn("%s: retried" % fine.id, lines)
        self.assertIn("%s: succeeded" % fine.id, lines)
        self.assertIn("%s: succeeded" % retried.id, lines)
        self.assertEqual([r.levelname for r in said.records if "failed:" in r.getMessage()], ["WARNING", "WARNING"])

    def test_a_queue_maps_a_function_over_its_arguments_in_few_requests(self):
        q = ls.SyncQueue("sweep", self.d)

        def add(a, b):
            return a + b
        handles = q.map(add, [1, 2, 3], [10, 20, 30])
        self.assertEqual(len(handles), 3)
        while ls.run_worker(q, registry={"add": add}, once=True, once_wait=0.2):
            pass
        self.assertEqual([h.result(timeout=5) for h in handles], [11, 22, 33])
        self.assertEqual(q.map(add, []), [])
        # A job refused (its envelope too large) is raised once all were tried; the others went in.
        big = "x" * (2 << 20)
        with self.assertRaises(ls.PayloadTooLarge) as e:
            q.map(add, ["a", big, "c"], ["1", "2", "3"])
        got = e.exception.handles
        self.assertEqual([h is None for h in got], [False, True, False])
        self.assertEqual(self.d.count("sweep", "queued"), 2)

    def test_a_result_larger_than_the_plane_takes_fails_its_job_once_saying_so(self):
        q = ls.SyncQueue("too-big", self.d)

        def huge():
            return "x" * (2 << 20)

        def huge_stream():
            yield 1
            return "x" * (2 << 20)

        def huge_value():
            yield "y" * (300 << 10)  # a frame takes 256 KiB
        registry = {"huge": huge, "huge_stream": huge_stream, "huge_value": huge_value}
        for fn in (huge, huge_stream, huge_value):
            h = q.submit(fn)
            # on_done hears the outcome the job has: the failure, never the success its handler returned.
            heard = []
            ls.run_worker(q, registry=registry, once=True, retries=3,
                          on_done=lambda job, out: heard.append((out["state"], type(out.get("error")).__name__)))
            self.assertEqual(heard, [("failed", "PayloadTooLarge")], fn.__name__)
            row = self.d.get(h.id)
            self.assertEqual((row["state"], row["attempt"], row["error"]["type"]), ("failed", 1, "PayloadTooLarge"), fn.__name__)
            if fn is not huge_value:
                self.assertTrue(row["error"]["message"].startswith("the handler's result is too large for the plane: "), row["error"])

    def test_a_job_submitted_inside_a_job_has_it_for_parent_and_its_origin(self):
        q = ls.SyncQueue("lineage", self.d)
        kids = []

        def spawn():
            kids.append(q.submit("child").id)
            kids.extend(h.id for h in q.map("child", [1, 2]))
        top = q.submit_with({"origin": "run-7"}, spawn)
        ls.run_worker(q, registry={"spawn": spawn}, once=True)
        self.assertEqual(top.result(timeout=5), None)
        for k in kids:
            self.assertEqual((self.d.get(k)["parent"], ls.decode_envelope(self.d.get(k)["envelope"]).get("origin")), (top.id, "run-7"))

    def test_a_queue_schedules_a_call_as_submit_makes_one(self):
        q = ls.SyncQueue("cron", self.d)
        s = q.schedule_with({"timezone": "Europe/Berlin", "priority": 3, "time_limit_ms": 60000, "max_retries": 2},
                            "nightly", "0 3 * * *", "tasks:report", "eu", days=7)
        self.assertEqual((s["name"], s["timezone"], s["priority"]), ("nightly", "Europe/Berlin", 3))
        env = ls.decode_envelope(s["envelope"])
        self.assertEqual((env["fn"], env["module"], env["args"], env["kwargs"]), ("report", "tasks:report", ["eu"], {"days": 7}))
        self.assertEqual((env["time_limit_ms"], env["max_retries"], env.get("traceparent")), (60000, 2, None))  # each tick its own trace
        # Every second: its ticks submit the call, which a worker runs by its name.
        q.schedule("each-second", "* * * * * *", "tick", 2, "x")
        job = self.d.claim("cron", "w", wait=5)
        self.assertRegex(job.id, r"^schedule:cron:each-second:\d+000$")
        env = ls.decode_envelope(job.envelope)
        self.assertEqual((env["fn"], env["args"], env["kwargs"]), ("tick", [2, "x"], {}))
        self.assertEqual([x["name"] for x in q.schedules()], ["each-second", "nightly"])
        q.unschedule("each-second")
        self.assertEqual([x["name"] for x in q.schedules()], ["nightly"])
        with self.assertRaises(ls.NotFound):
            q.unschedule("each-second")
        # Refused before anything is set: an option it does not take, a lambda.
        with self.assertRaisesRegex(TypeError, r"^schedule_with: no option tz \(timezone, perhaps\); its options are timezone, "):
            q.schedule_with({"tz": "UTC"}, "utc", "0 3 * * *", "x")
        with self.assertRaisesRegex(TypeError, "^a lambda has no name a worker can find"):
            q.schedule("anon", "0 3 * * *", lambda: 1)
        self.assertEqual([x["name"] for x in q.schedules()], ["nightly"])

    def test_a_schedule_set_while_its_queue_is_passed_over_fires(self):
        # The clock's pass read the queue's schedules before the second was set: the pass's answer
        # (the nightly tick, hours away) must not hide the change it did not see.
        d = self.d
        entered, release = threading.Event(), threading.Event()
        real = d._fire

        def slow(queue):
            nxt = real(queue)
            entered.set()
            release.wait(5)
            return nxt
        d._fire = slow
        d.set_schedule("race", "nightly", cron="0 3 * * *", envelope=b"n")
        self.assertTrue(entered.wait(5))
        d.set_schedule("race", "each-second", cron="* * * * * *", envelope=b"e")
        d._fire = real
        release.set()
        job = d.claim("race", "w", wait=5)
        self.assertIsNotNone(job)
        self.assertEqual(job.envelope, b"e")

    def test_a_schedule_it_cannot_read_is_left_alone_and_does_not_spin_its_clock(self):
        d = self.d
        d.set_schedule("tick2", "good", cron="* * * * * *", envelope=b"t")
        # A row set by another plane in a form this one cannot read, due since long ago.
        d._db.execute("INSERT INTO schedules (ns, queue, name, cron, envelope, priority, next_at, created_at, updated_at) "
                      "VALUES (?, 'tick2', 'other', '0 0 1W * *', X'00', 0, 1, 1, 1)", (d.namespace,))
        self.assertIsNotNone(d.claim("tick2", "w", wait=5))  # the readable one fires
        deadline = time.time() + 5
        while time.time() < deadline and (d.clock.at.get("tick2") or 0) <= 1:
            time.sleep(0.01)
        self.assertGreater(d.clock.at["tick2"], time.time() * 1000 - 5000)  # next pass: the good tick's, not the unread row's
        other = [s for s in d.list_schedules("tick2") if s["name"] == "other"][0]
        self.assertEqual(other["next_at"], 1)  # left for a plane that reads it

    def test_without_croniter_a_schedule_says_what_to_install(self):
        from lakeshore import cron
        saved, cron._croniter = cron._croniter, None
        try:
            with self.assertRaises(ls.LakeshoreError) as e:
                self.d.set_schedule("q", "s", cron="0 9 * * *", envelope=b"x")
            self.assertIn("pip install croniter (from a lakeshore checkout: pip install './client/python[cron]')", str(e.exception))
            self.assertEqual(self.d.list_schedules("q"), [])
            with self.assertRaises(ls.BadRequest):  # the syntax is checked all the same
                self.d.set_schedule("q", "s", cron="every day", envelope=b"x")
        finally:
            cron._croniter = saved

    def test_the_sql_artifact_is_the_cores(self):
        # scripts/python-sql.ts --check regenerates it from src/core and compares (node test too).
        with open(os.path.join(os.path.dirname(ls.__file__), "sql.json"), encoding="utf-8") as f:
            artifact = json.load(f)
        names = sorted(os.listdir(os.path.join(ROOT, "migrations")))
        self.assertEqual([m["name"] for m in artifact["migrations"]], [n for n in names if n.endswith(".sql")])


def _tripled(x):
    return 3 * x


class ReferenceWorker(TempDirs):
    """run_worker's arguments as the contract's reference spells them, on the local plane."""

    def setUp(self):
        self.d = ls.Dispatch(":memory:")
        self.addCleanup(self.d.close)

    def test_stop_may_be_a_callable_or_an_event_and_an_idle_worker_hears_it_within_a_second(self):
        q = ls.SyncQueue("idle", dispatch=self.d)
        for stop_kind in ("callable", "event"):
            flag, event = [False], threading.Event()
            stop = (lambda: flag[0]) if stop_kind == "callable" else event
            ran = []
            t = threading.Thread(target=lambda: ran.append(ls.run_worker(q, stop=stop)), daemon=True)
            t.start()
            time.sleep(0.3)  # not ordering anything: the worker is waiting on the empty queue either way
            t0 = time.monotonic()
            flag[0] = True
            event.set()
            t.join(timeout=10)
            self.assertFalse(t.is_alive(), stop_kind)
            # Its claim waited 20 s before: a stop must be heard well before that (within 1 s, with slack for a busy machine).
            self.assertLess(time.monotonic() - t0, 5, stop_kind)
            self.assertEqual(ran, [0])
        with self.assertRaises(TypeError):
            ls.run_worker(q, stop="soon")

    def test_concurrency_runs_that_many_jobs_at_once_under_one_worker_id(self):
        q = ls.SyncQueue("together", dispatch=self.d)
        meet = threading.Barrier(4, timeout=10)  # it lets jobs through only four at a time, all running at once
        seen = []

        def gather(i):
            meet.wait()
            seen.append(self.d.workers())
            return i

        hs = [q.submit("gather", i) for i in range(8)]
        stop, ran = threading.Event(), []
        t = threading.Thread(target=lambda: ran.append(ls.run_worker(q, registry={"gather": gather}, stop=stop, concurrency=4)), daemon=True)
        t.start()
        self.assertEqual(sorted(h.result(timeout=30) for h in hs), list(range(8)))
        # One worker, with four slots, heard from on the queue while its jobs ran.
        self.assertEqual({tuple((w["worker_id"], w["concurrency"]) for w in ws if "together" in w["queues"]) for ws in seen},
                         {(("%s:%d:py" % (socket.gethostname(), os.getpid()), 4),)})
        stop.set()
        t.join(timeout=10)
        self.assertFalse(t.is_alive())
        self.assertEqual(ran, [8])
        for bad in (0, 1.5, True):
            with self.assertRaises(ValueError):
                ls.run_worker(q, concurrency=bad)

    def test_a_jobs_ack_carries_the_claim_of_the_next(self):
        # One request a job, as Node's worker: the ack and the next claim go together.
        calls = {"claim": 0, "ack": 0, "ack_and_claim": 0}
        for name in calls:
            def counted(*a, _real=getattr(self.d, name), _name=name, **k):
                calls[_name] += 1
                return _real(*a, **k)
            setattr(self.d, name, counted)
        q = ls.SyncQueue("chained", dispatch=self.d)
        hs = [q.submit("double", i) for i in range(20)]
        stop, ended = threading.Event(), []

        def on_done(job, outcome):
            ended.append(outcome["state"])
            if len(ended) == len(hs):
                stop.set()

        self.assertEqual(ls.run_worker(q, registry={"double": lambda x: 2 * x}, stop=stop, on_done=on_done), 20)
        self.assertEqual([h.result(timeout=5) for h in hs], [2 * i for i in range(20)])
        # Claims of their own: the first job's, and the wait after the last (the local plane's
        # ack_and_claim acks through its own ack, so acks are not counted here).
        self.assertGreaterEqual(calls["ack_and_claim"], 19, calls)
        self.assertLessEqual(calls["claim"], 2, calls)

    def test_a_newer_claim_outlives_an_older_attempts_answer(self):
        check_a_newer_claim_outlives_an_older_attempts_answer(self, self.d, "_run", lambda verb, values: verb.startswith("nack"))

    def test_the_client_forgets_the_claims_it_ended(self):
        # It kept every one: a long-running worker grew by an entry a job.
        q = ls.SyncQueue("forgotten", dispatch=self.d)
        hs = [q.submit("double", i) for i in range(30)]
        calls = []

        def flaky(x):
            calls.append(x)
            if calls.count(x) == 1 and x % 3 == 0:
                raise RuntimeError("once")
            return 2 * x

        stop, ended = threading.Event(), []
        ls.run_worker(q, registry={"double": flaky}, stop=stop, concurrency=3,
                      on_done=lambda job, outcome: outcome["state"] == "succeeded" and (ended.append(1), len(ended) == len(hs) and stop.set()))
        self.assertEqual([h.result(timeout=5) for h in hs], [2 * i for i in range(30)])
        self.assertEqual(len(self.d._claims), 0)

    def test_the_worker_names_its_attempt_on_every_call(self):
        # Not left to the client's memory of its claims, which another thread's claim of the job's
        # next attempt may have replaced: with that memory gone, frames, errors and acks still land.
        for name in ("claim", "ack_and_claim"):
            def forgetful(*a, _real=getattr(self.d, name), **k):
                out = _real(*a, **k)
                self.d._claims.clear()
                return out
            setattr(self.d, name, forgetful)

        def count(n):
            yield from range(n)

        def boom():
            raise RuntimeError("boom")

        q = ls.SyncQueue("named", dispatch=self.d)
        streamed, failed = q.submit("count", 3), q.submit("boom")
        stop, ended = threading.Event(), []
        ls.run_worker(q, registry={"count": count, "boom": boom}, stop=stop, retries=0,
                      on_done=lambda job, outcome: (ended.append(outcome["state"]), len(ended) == 2 and stop.set()))
        self.assertEqual(list(streamed.stream(timeout=5)), [0, 1, 2])
        with self.assertRaisesRegex(ls.InvocationFailed, "boom"):
            failed.result(timeout=5)

    def test_retries_count_in_the_jobs_current_budget_so_a_retried_job_gets_them_again(self):
        # The attempt number goes on across an operator's retry (3, 4, ...): counted against it,
        # the job failed for good at its first failure after the retry.
        q = ls.SyncQueue("again", dispatch=self.d)
        runs = []

        def flaky():
            runs.append(1)
            if len(runs) <= 3:
                raise RuntimeError("run %d fails" % len(runs))
            return len(runs)

        h = q.submit("flaky")
        for _ in range(2):
            ls.run_worker(q, registry={"flaky": flaky}, once=True)
        self.assertEqual((self.d.get(h.id)["state"], len(runs)), ("failed", 2))
        self.d.retry(h.id)
        for _ in range(2):
            ls.run_worker(q, registry={"flaky": flaky}, once=True)
        self.assertEqual(h.result(timeout=5), 4)
        self.assertEqual(self.d.get(h.id)["attempt"], 4)

    def test_what_a_handler_raises_ends_its_job_not_the_worker(self):
        # argparse's error, a script's sys.exit, an async handler's CancelledError: BaseExceptions
        # ended the worker's loop, the job left running under it until its lease ran out, and every
        # job after it waited.
        import argparse
        import asyncio

        async def awaits_a_cancelled_task():
            task = asyncio.ensure_future(asyncio.sleep(10))
            await asyncio.sleep(0)
            task.cancel()
            await task

        def cli(*argv):
            p = argparse.ArgumentParser(prog="train")
            p.add_argument("--lr", type=float, required=True)
            return p.parse_args(list(argv)).lr

        def done_early():
            yield 1
            sys.exit(0)

        q = ls.SyncQueue("exits", dispatch=self.d)
        bad, cancelled, fine, zero, early = (q.submit("cli"), q.submit("cancelled"), q.submit("cli", "--lr", "0.5"), q.submit("zero"),
                                             q.submit("early"))
        everyone = (bad, cancelled, fine, zero, early)
        ran = ls.run_worker(q, registry={"cli": cli, "cancelled": awaits_a_cancelled_task, "zero": lambda: sys.exit(0), "early": done_early},
                            retries=0, stop=lambda: all(self.d.get(h.id)["state"] in ("succeeded", "failed") for h in everyone))
        self.assertEqual(ran, 5)
        failed = self.d.get(bad.id)
        self.assertEqual((failed["state"], failed["error"]["type"], failed["error"]["message"]),
                         ("failed", "SystemExit", "the handler exited: sys.exit(2)"))
        self.assertIn("parse_args", failed["error"]["stack"])
        failed = self.d.get(cancelled.id)
        self.assertEqual((failed["state"], failed["error"]["type"]), ("failed", "CancelledError"))
        self.assertIn("awaits_a_cancelled_task", failed["error"]["stack"])
        self.assertEqual((fine.result(timeout=5), zero.result(timeout=5), early.result(timeout=5), list(early.stream())), (0.5, None, None, [1]))

    def test_a_job_handed_over_as_the_worker_stops_goes_back_uncharged(self):
        # Its ack carried the claim of the next job, and the stop came as the answer did: the next
        # job never ran, so it goes back without spending an attempt (a nack spent one).
        q = ls.SyncQueue("handed", dispatch=self.d)
        first, second = q.submit("one"), q.submit("one")
        stop = threading.Event()
        real = self.d.ack_and_claim

        def ack_and_claim(*a, **k):
            out = real(*a, **k)
            stop.set()
            return out

        self.d.ack_and_claim = ack_and_claim
        self.assertEqual(ls.run_worker(q, registry={"one": lambda: 1}, stop=stop), 1)
        self.assertEqual(first.result(timeout=5), 1)
        self.assertEqual((self.d.get(second.id)["state"], self.d.get(second.id)["attempt"]), ("queued", 1))
        again = self.d.claim("handed", "other")
        self.assertEqual((again.id, again.attempt, again.budget_attempt), (second.id, 2, 1))

    def test_root_may_be_a_path_and_the_job_sees_it(self):
        import pathlib
        tasks = self.temp_dir("lakeshore-root-")
        pkg = os.path.join(tasks, "rootpkg_%s" % os.urandom(3).hex())
        os.makedirs(pkg)
        open(os.path.join(pkg, "__init__.py"), "w").close()
        with open(os.path.join(pkg, "tasks.py"), "w") as f:
            f.write("import lakeshore as ls\ndef where(x):\n    return [x, ls.current_job().root, ls.current_job().prefix]\n")
        q = ls.SyncQueue("rooted", dispatch=self.d)
        h = q.submit("%s.tasks:where" % os.path.basename(pkg), 1)
        self.assertEqual(ls.run_worker(q, root=pathlib.Path(tasks), once=True), 1)
        self.assertEqual(h.result(timeout=5), [1, tasks, None])

    def test_a_worker_says_who_it_is_and_that_it_stopped(self):
        check_a_worker_says_who_it_is(self, self.d)

    def test_the_version_a_worker_tells_is_the_packages(self):
        import re
        with open(os.path.join(os.path.dirname(__file__), "..", "pyproject.toml")) as f:
            self.assertEqual(re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1), ls.__version__)

    def test_a_module_named_as_a_file_or_a_misspelled_function_fails_with_what_was_meant(self):
        tasks = self.temp_dir("lakeshore-typo-")
        mod = "shapes_%s" % os.urandom(3).hex()
        with open(os.path.join(tasks, mod + ".py"), "w") as f:
            f.write("def square(x):\n    return x * x\n")
        q = ls.SyncQueue("typos", dispatch=self.d)
        for fn, says in (("%s.py:square" % mod, "a module is named without .py: %s:square" % mod),
                         ("%s:sqare" % mod, "%s has no sqare (square, perhaps)" % mod)):
            h = q.submit(fn, 3)
            self.assertEqual(ls.run_worker(q, root=tasks, once=True), 1)
            with self.assertRaises(ls.InvocationFailed) as e:
                h.result(timeout=5)
            self.assertTrue(e.exception.error["message"].endswith(says), e.exception.error["message"])
        # A module that does not compile: where, once, not retried (it fails the same at every attempt).
        with open(os.path.join(tasks, mod + "_bad.py"), "w") as f:
            f.write("def cube(x) return x ** 3\n")
        h = q.submit("%s_bad:cube" % mod, 3)
        self.assertEqual(ls.run_worker(q, root=tasks, once=True, retries=3), 1)
        with self.assertRaises(ls.InvocationFailed) as e:
            h.result(timeout=5)
        self.assertEqual((e.exception.error["type"], self.d.get(h.id)["attempt"]), ("Unrunnable", 1))
        # Its file and line, the line, and a caret (where exactly, and the words, are the interpreter's).
        self.assertRegex(e.exception.error["message"], r"under .*: %s_bad\.py:1: .+\n    def cube\(x\) return x \*\* 3\n    +\^$" % mod)
        # A registered name misspelled is told that name.
        h = q.submit("sqare", 3)
        ls.run_worker(q, registry={"square": lambda x: x * x, "other": print}, once=True)
        with self.assertRaises(ls.InvocationFailed) as e:
            h.result(timeout=5)
        self.assertIn("function 'sqare' is not registered with this worker (it has 'square', perhaps), and", e.exception.error["message"])

    def test_a_function_added_after_the_worker_imported_its_module_says_to_start_it_again(self):
        tasks = self.temp_dir("lakeshore-edit-")
        mod = "edited_%s" % os.urandom(3).hex()
        path = os.path.join(tasks, mod + ".py")
        with open(path, "w") as f:
            f.write("def square(x):\n    return x * x\n")
        q = ls.SyncQueue("edits", dispatch=self.d)
        h = q.submit("%s:square" % mod, 3)
        self.assertEqual(ls.run_worker(q, root=tasks, once=True), 1)
        self.assertEqual(h.result(timeout=5), 9)
        # A function missing from a file nobody touched is just missing.
        h = q.submit("%s:cube" % mod, 3)
        ls.run_worker(q, root=tasks, once=True)
        with self.assertRaises(ls.InvocationFailed) as e:
            h.result(timeout=5)
        self.assertTrue(e.exception.error["message"].endswith("%s has no cube" % mod), e.exception.error["message"])
        # Written into the file after this process imported it: the worker runs what it imported, and says so.
        with open(path, "a") as f:
            f.write("def cube(x):\n    return x ** 3\n")
        # (a second on: a file system stamps with a coarser clock than time.time(); an edit comes seconds later)
        os.utime(path, (time.time() + 1, time.time() + 1))
        h = q.submit("%s:cube" % mod, 3)
        ls.run_worker(q, root=tasks, once=True)
        with self.assertRaises(ls.InvocationFailed) as e:
            h.result(timeout=5)
        self.assertTrue(e.exception.error["message"].endswith(
            "%s has no cube; %s.py changed after this worker imported it, and a worker runs the code it imported: "
            "start it again to run the change" % (mod, mod)), e.exception.error["message"])

    def test_a_fn_in_the_module_form_is_its_module_when_the_envelope_names_none(self):
        # `lakeshore submit gpu pkg.mod:train` and a Node producer's q.submit("pkg.mod:train") send
        # the name as fn with no module: a worker with a root imports it all the same.
        tasks = self.temp_dir("lakeshore-fnref-")
        pkg = "fnref_%s" % os.urandom(3).hex()
        os.makedirs(os.path.join(tasks, pkg))
        open(os.path.join(tasks, pkg, "__init__.py"), "w").close()
        with open(os.path.join(tasks, pkg, "tasks.py"), "w") as f:
            f.write("def twice(x):\n    return 2 * x\n")
        inv = self.d.submit("fnref", ls.encode_envelope("%s.tasks:twice" % pkg, [21]), id="fnref-1")
        q = ls.SyncQueue("fnref", dispatch=self.d)
        self.assertEqual(ls.run_worker(q, root=tasks, once=True), 1)
        self.assertEqual(json.loads(self.d.result(inv, timeout=5)), 42)
        # A plain name is still only a registry's: nothing is imported for it.
        plain = self.d.submit("fnref", ls.encode_envelope("twice", [1]), id="fnref-2")
        self.assertEqual(ls.run_worker(q, root=tasks, once=True), 1)
        with self.assertRaises(ls.InvocationFailed) as e:
            self.d.result(plain, timeout=5)
        self.assertIn("not registered with this worker, and the job names no module", e.exception.error["message"])

    def test_a_failed_jobs_stack_starts_at_its_handler(self):
        def inner(x):
            raise ValueError("deep %s" % x)

        def outer(x):
            return inner(x)

        q = ls.SyncQueue("stacks", dispatch=self.d)
        h = q.submit(outer, 7)
        ls.run_worker(q, registry={"outer": outer}, once=True, retries=0)
        with self.assertRaises(ls.InvocationFailed) as e:
            h.result(timeout=5)
        stack = e.exception.error["stack"]
        first = stack.splitlines()[1]
        self.assertTrue(first.startswith('  File "%s"' % os.path.abspath(__file__).replace(".pyc", ".py")) and first.endswith("in outer"), stack)
        self.assertIn("in inner", stack)
        self.assertTrue(stack.endswith("ValueError: deep 7\n"), stack)
        self.assertNotIn(os.path.dirname(os.path.abspath(ls.__file__)) + os.sep, stack)  # none of the worker's own frames

    def test_submit_with_refuses_an_option_it_does_not_take_naming_what_it_meant(self):
        q = ls.SyncQueue("opts", dispatch=self.d)
        with self.assertRaises(TypeError) as e:
            q.submit_with({"delay_ms": 5000, "dealy": 5}, "f")
        self.assertTrue(str(e.exception).startswith(
            "submit_with: no option delay_ms (delay (seconds), perhaps), dealy; its options are id, key, priority"), e.exception)
        self.assertEqual(self.d.count("opts"), 0)  # nothing was submitted
        h = q.submit_with({"delay": 60, "max_attempts": 2}, "f")
        self.assertEqual(self.d.get(h.id)["state"], "delayed")

    def test_a_lambda_is_refused_at_submit_unless_it_travels_by_value(self):
        q = ls.SyncQueue("lambdas", dispatch=self.d)
        with self.assertRaises(TypeError) as e:
            q.submit(lambda: 1)
        self.assertTrue(str(e.exception).startswith("a lambda has no name a worker can find"), e.exception)
        with self.assertRaises(TypeError):
            q.submit_with({"priority": 1}, lambda x: x, 2)
        self.assertEqual(self.d.count("lambdas"), 0)  # nothing was submitted
        with self.assertRaises(TypeError) as e:
            q.submit(42)
        self.assertIn("submit needs a function or a function's name", str(e.exception))

    def test_retries_rule_the_budget_where_neither_the_job_nor_its_queue_sets_one(self):
        q = ls.SyncQueue("flaky", dispatch=self.d)
        tries = []

        def always(x):
            tries.append(x)
            raise ValueError("not today")

        h = q.submit("always", 1)
        while ls.run_worker(q, registry={"always": always}, retries=5, once=True, once_wait=0.2):
            pass
        self.assertEqual(len(tries), 6)  # retrying while attempt <= 5
        with self.assertRaises(ls.InvocationFailed) as e:
            h.result(timeout=5)
        self.assertEqual((e.exception.error["type"], e.exception.error["message"]), ("ValueError", "not today"))
        # A queue's budget wins over the worker's.
        self.d.configure_queue("capped", max_attempts=2)
        q2 = ls.SyncQueue("capped", dispatch=self.d)
        q2.submit("always", 2)
        while ls.run_worker(q2, registry={"always": always}, retries=5, once=True, once_wait=0.2):
            pass
        self.assertEqual(tries.count(2), 2)

    def test_a_result_json_cannot_write_fails_its_job_at_once_and_a_nan_is_null(self):
        # As a Node worker does: a result (or a yielded value) JSON cannot write is the handler's
        # TypeError, said before the stream's END; a NaN or an infinity is written null, as
        # JSON.stringify writes it, so a Node reader parses what a Python worker acks.
        def counted():
            yield 1
            return {1, 2}

        def yields_a_set():
            yield {3}

        registry = {"a_set": lambda: {1, 2}, "an_object": lambda: object(), "counted": counted,
                    "yields_a_set": yields_a_set, "loss": lambda: {"loss": float("nan"), "best": [float("inf"), 0.5]}}
        for fn in registry:
            self.d.submit("json", ls.encode_envelope(fn, []), id="json-" + fn)
        q = ls.SyncQueue("json", dispatch=self.d)
        # retries=3, yet each not-JSON job runs once: it would answer the same again.
        while ls.run_worker(q, registry=registry, retries=3, once=True, once_wait=0.2):
            pass
        self.assertEqual(self.d.result("json-loss", timeout=5), b'{"loss":null,"best":[null,0.5]}')
        for fn, what in (("a_set", "result"), ("an_object", "result"), ("counted", "result"), ("yields_a_set", "a value it yielded")):
            row = self.d.get("json-" + fn)
            self.assertEqual((row["state"], row["attempt"], row["error"]["type"]), ("failed", 1, "TypeError"), fn)
            self.assertIn("the handler's %s is not JSON" % what, row["error"]["message"], fn)
        kinds = [ls.decode_frame(f)[0] for _, f in self.d.journal_read("json-counted")]
        self.assertEqual(kinds, [ls.FrameKind.BEGIN, ls.FrameKind.VALUE, ls.FrameKind.ERROR])
        # And an argument so: a Node worker parses the envelope a Python producer writes.
        self.assertIn(b'"args":[null,[1,null]]', ls.encode_envelope("f", [float("nan"), (1, float("-inf"))]))

    def test_async_handlers_and_async_generators_run_as_the_envelope_says(self):
        # docs/envelope.md: "A plain or async function ... A generator (sync or async)", as in Node.
        import asyncio

        async def fetch(x):
            await asyncio.sleep(0.01)
            return [x * 2, ls.current_job().id]

        async def tokens(n):
            for i in range(n):
                await asyncio.sleep(0.001)
                yield "t%d" % i

        async def slow():  # past its 200 ms limit; short, as its abandoned thread runs on until it ends
            await asyncio.sleep(1.5)

        q = ls.SyncQueue("async", dispatch=self.d)
        f, t = q.submit(fetch, 21), q.submit(tokens, 3)
        late = q.submit_with({"time_limit_ms": 200, "max_retries": 0}, slow)
        registry = {"fetch": fetch, "tokens": tokens, "slow": slow}
        while ls.run_worker(q, registry=registry, once=True, once_wait=0.2):
            pass
        self.assertEqual(f.result(timeout=5), [42, f.id])
        self.assertEqual(list(t.stream()), ["t0", "t1", "t2"])
        self.assertIsNone(t.result(timeout=5))
        with self.assertRaisesRegex(ls.InvocationFailed, "time limit of 200 ms, the job's own$"):
            late.result(timeout=5)

    def test_a_stream_of_a_job_that_fails_raises_its_failure_after_its_last_value(self):
        def fails_after_one():
            yield 1
            raise ValueError("boom")

        def plain_fails():
            raise ValueError("no values")

        q = ls.SyncQueue("streams", dispatch=self.d)
        failing = q.submit_with({"max_attempts": 1}, fails_after_one)
        plain = q.submit_with({"max_attempts": 1}, plain_fails)
        good = q.submit("fine")
        registry = {"fails_after_one": fails_after_one, "plain_fails": plain_fails, "fine": lambda: 7}
        while ls.run_worker(q, registry=registry, once=True, once_wait=0.2):
            pass
        seen = []
        with self.assertRaisesRegex(ls.InvocationFailed, "boom"):
            for v in failing.stream():
                seen.append(v)
        self.assertEqual(seen, [1])
        with self.assertRaisesRegex(ls.InvocationFailed, "no values"):
            list(plain.stream())
        self.assertEqual(list(good.stream()), [])  # no values, and no raise: it succeeded
        cancelled = q.submit("never")
        cancelled.cancel()
        with self.assertRaises(ls.InvocationCancelled):
            list(cancelled.stream())

    def test_a_job_submitted_inside_a_job_gets_its_origin_and_origin_for_decides_it(self):
        q = ls.SyncQueue("orig", dispatch=self.d)
        seen = {}

        def parent():
            q.submit_with({"id": "kid-%s" % ls.current_job().id}, "kid")

        reg = {"parent": parent, "kid": lambda: 2}

        def drain():
            while ls.run_worker(q, registry=reg, once=True, once_wait=0.2, on_done=lambda job, out: seen.update({job["id"]: job["origin"]})):
                pass

        q.submit_with({"id": "p1", "origin": "req-1"}, "parent")
        q.submit_with({"id": "p0"}, "parent")
        drain()
        self.assertEqual((seen["kid-p1"], seen["kid-p0"]), ("req-1", None))
        ls.set_origin_for(lambda job: "from:%s" % job.id)
        self.addCleanup(ls.set_origin_for, None)
        q.submit_with({"id": "p2", "origin": "req-2"}, "parent")
        drain()
        self.assertEqual(seen["kid-p2"], "from:p2")

    def test_dispatch_by_name_takes_the_process_routes_and_sends_the_unrouted_to_default(self):
        routes = os.path.join(self.temp_dir("lakeshore-routes-"), "routes.json")
        with open(routes, "w") as f:
            json.dump({"train": {"queue": "gpu", "time_limit_ms": 3600000, "max_retries": 2, "priority": 1}}, f)
        before = os.environ.get("LAKESHORE_ROUTES")
        os.environ["LAKESHORE_ROUTES"] = routes
        self.addCleanup(lambda: os.environ.__setitem__("LAKESHORE_ROUTES", before) if before is not None else os.environ.pop("LAKESHORE_ROUTES", None))
        self.addCleanup(ls.set_routes, None)
        h = ls.dispatch_by_name("train", {"epochs": 3}, dispatch=self.d)
        row = self.d.get(h.id)
        env = json.loads(bytes(row["envelope"]).decode())
        self.assertEqual((row["queue"], row["priority"]), ("gpu", 1))
        self.assertEqual((env["fn"], env["kwargs"], env["time_limit_ms"], env["max_retries"]), ("train", {"epochs": 3}, 3600000, 2))
        other = ls.dispatch_by_name("other", [1, 2], dispatch=self.d)
        self.assertEqual(self.d.get(other.id)["queue"], ls.DEFAULT_POOL)
        self.assertEqual(json.loads(bytes(self.d.get(other.id)["envelope"]).decode())["args"], [1, 2])
        # LAKESHORE_ROUTES may name a module instead, whose ROUTES is the table (the host app's way).
        mod_dir = self.temp_dir("lakeshore-routes-mod-")
        mod = "routes_%s" % os.urandom(3).hex()
        with open(os.path.join(mod_dir, mod + ".py"), "w") as f:
            f.write("ROUTES = {'train': {'queue': 'mod-gpu'}}\n")
        sys.path.insert(0, mod_dir)
        self.addCleanup(sys.path.remove, mod_dir)
        os.environ["LAKESHORE_ROUTES"] = mod
        self.assertEqual(self.d.get(ls.dispatch_by_name("train", [], dispatch=self.d).id)["queue"], "mod-gpu")
        ls.set_routes({"train": {"queue": "tpu"}})  # wins over the environment
        self.assertEqual(self.d.get(ls.dispatch_by_name("train", [], dispatch=self.d).id)["queue"], "tpu")
        # A worker naming no pool serves `default`: the daemon does, with no --queue.
        served = ls.run_worker(ls.SyncQueue(ls.DEFAULT_POOL, dispatch=self.d), registry={"other": lambda a, b: a + b}, once=True)
        self.assertEqual((served, other.result(timeout=5)), (1, 3))

    def test_the_reference_signature_as_written(self):
        from dreamlake.lakeshore import Dispatch, HttpDispatch, SyncQueue, run_worker  # noqa: F401  the reference's import line
        q = SyncQueue("gpu", dispatch=self.d)
        h = q.submit("three", 3)
        self.assertEqual(run_worker(q, root=None, registry={"three": lambda x: x * 3}, once=False, poll=0.05, retries=1,
                                    stop=lambda: h.dispatch.get(h.id)["state"] == "succeeded", allow_pickled=None,
                                    runtime_policy="minor"), 1)
        self.assertEqual(h.result(timeout=5), 9)
        q.submit("three", 4)
        self.assertEqual(run_worker(q, registry={"three": lambda x: x * 3}, once=True), 1)  # drain one job

    def test_a_queues_time_limit_ends_its_jobs_that_name_none_and_a_jobs_own_wins(self):
        self.d.configure_queue("tl", time_limit_ms=300)
        q = ls.SyncQueue("tl", dispatch=self.d)

        def slow(s):
            time.sleep(s)
            return "done"

        late = q.submit_with({"max_attempts": 1}, "slow", 3)
        own = q.submit_with({"time_limit_ms": 10_000}, "slow", 0.6)
        for _ in range(2):
            ls.run_worker(q, registry={"slow": slow}, once=True, retries=0)
        with self.assertRaises(ls.InvocationFailed) as e:
            late.result(timeout=5)
        self.assertEqual(e.exception.error["type"], "TimeLimitExceeded")
        self.assertEqual(e.exception.error["message"], "the job ran past its time limit of 300 ms, its queue's")
        self.assertEqual(own.result(timeout=5), "done")

    def test_a_job_past_the_default_time_limit_is_told_how_to_set_one(self):
        from lakeshore import worker
        q = ls.SyncQueue("default-limit", dispatch=self.d)
        h = q.submit_with({"max_attempts": 1}, "slow")
        given = q.submit_with({"max_attempts": 1}, "slow")
        saved, worker.DEFAULT_TIME_LIMIT_MS = worker.DEFAULT_TIME_LIMIT_MS, 150  # the default, made short
        try:
            ls.run_worker(q, registry={"slow": lambda: time.sleep(2)}, once=True, retries=0)
        finally:
            worker.DEFAULT_TIME_LIMIT_MS = saved
        ls.run_worker(q, registry={"slow": lambda: time.sleep(2)}, once=True, retries=0, time_limit_ms=150)
        with self.assertRaises(ls.InvocationFailed) as e:
            h.result(timeout=5)
        self.assertEqual(e.exception.error["message"], "the job ran past its time limit of 150 ms, the default (a job sets its own with "
                         "time_limit_ms, a queue with its time_limit_ms setting, a worker with --time-limit-ms; 0 is none)")
        with self.assertRaises(ls.InvocationFailed) as e:
            given.result(timeout=5)
        self.assertEqual(e.exception.error["message"], "the job ran past its time limit of 150 ms, its worker's")

    def test_a_job_after_one_left_past_its_limit_runs_at_once_on_a_thread_of_its_own(self):
        # The worker runs calls on one reused thread; the call left running past its limit keeps
        # that thread, so the next job must not wait behind it (it would run out its own limit).
        q = ls.SyncQueue("abandon", dispatch=self.d)
        release = threading.Event()

        def stuck():
            release.wait(20)
            return "late"

        first = q.submit_with({"time_limit_ms": 200, "max_attempts": 1}, "stuck")
        second = q.submit_with({"time_limit_ms": 2_000}, "quick")
        try:
            for _ in range(2):
                ls.run_worker(q, registry={"stuck": stuck, "quick": lambda: "quick"}, once=True, retries=0)
            with self.assertRaises(ls.InvocationFailed) as e:
                first.result(timeout=5)
            self.assertEqual(e.exception.error["type"], "TimeLimitExceeded")
            self.assertEqual(second.result(timeout=5), "quick")
        finally:
            release.set()

    def test_the_thread_that_ran_a_workers_calls_ends_with_the_worker(self):
        # A program may run workers in threads of its own, one after another: none may leave a thread behind.
        q = ls.SyncQueue("threads", dispatch=self.d)
        h = q.submit("one")
        ls.run_worker(q, registry={"one": lambda: 1}, once=True)
        self.assertEqual(h.result(timeout=5), 1)
        end = time.monotonic() + 10
        while any(t.name == "lakeshore-job" for t in threading.enumerate()):
            self.assertLess(time.monotonic(), end, "the worker's call thread outlived it")
            time.sleep(0.01)

    def test_heartbeats_keep_a_job_past_its_lease(self):
        q = ls.SyncQueue("beats", dispatch=self.d)
        seen = []

        def long():
            time.sleep(1.5)  # three times its lease: only heartbeats keep it this worker's
            return "kept"

        h = q.submit("long")
        beat = self.d.heartbeat

        def counted(*a, **k):
            seen.append(a[0])
            return beat(*a, **k)

        self.d.heartbeat = counted
        try:
            ls.run_worker(q, registry={"long": long}, once=True, lease=0.5)
        finally:
            del self.d.heartbeat
        self.assertEqual(h.result(timeout=5), "kept")
        self.assertEqual(self.d.get(h.id)["attempt"], 1)
        self.assertGreaterEqual(len(seen), 3)

    def test_the_heartbeat_thread_beats_each_job_until_it_is_forgotten_or_says_no_more(self):
        from lakeshore.job_clock import Beats
        beats = Beats()
        seen = {"a": 0, "b": 0, "c": 0}

        def beat(name, more=True):
            def f():
                seen[name] += 1
                return more
            return f

        def until(cond, what):
            end = time.monotonic() + 10
            while not cond():
                self.assertLess(time.monotonic(), end, "timed out waiting for " + what)
                time.sleep(0.01)

        beats.watch("a", 0.03, beat("a"))
        beats.watch("b", 0.03, beat("b"))
        beats.watch("c", 0.03, beat("c", more=False))  # its first beat says no more are needed
        until(lambda: seen["a"] >= 3, "three beats of a")
        beats.forget("a")
        a = seen["a"]
        until(lambda: seen["b"] >= seen["a"] + 4, "four more beats of b")
        self.assertLessEqual(seen["a"], a + 1)  # one may have been on its way as a was forgotten
        self.assertEqual(seen["c"], 1)
        beats.forget("b")

    def test_a_registry_hit_comes_before_the_pickled_function(self):
        q = ls.SyncQueue("order", dispatch=self.d)
        h = q.submit_with({"by_value": True}, _tripled, 5)
        self.assertEqual(ls.run_worker(q, registry={"_tripled": lambda x: "from the registry"}, once=True), 1)
        self.assertEqual(h.result(timeout=5), "from the registry")


class DaemonWithItsParent(TempDirs):
    def test_a_daemon_told_to_exit_with_its_parent_stops_once_its_parent_is_killed_outright(self):
        # `lakeshore worker start` passes --exit-with-parent: a supervisor SIGKILLed (or OOM-killed)
        # passes no signal on, and its daemon must not go on claiming jobs as an orphan.
        env = dict(os.environ, LAKESHORE_HOME=self.temp_dir("lakeshore-daemon-home-"),
                   PYTHONPATH=os.path.join(ROOT, "client", "python"))
        env.pop("LAKESHORE_URL", None)
        starter = subprocess.Popen(
            [sys.executable, "-c",
             "import subprocess, sys\n"
             "p = subprocess.Popen([sys.executable, '-m', 'lakeshore.daemon', '--queue', 'orphan', '--exit-with-parent'])\n"
             "print(p.pid, flush=True)\n"
             "p.wait()\n"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: starter.poll() is None and starter.kill())
        pid = int(starter.stdout.readline())
        self.addCleanup(lambda: _alive(pid) and os.kill(pid, 9))
        line = starter.stderr.readline()
        self.assertIn("serving orphan", line)
        starter.kill()
        starter.wait(10)
        end = time.monotonic() + 10
        while _alive(pid):
            self.assertLess(time.monotonic(), end, "the daemon still runs 10 s after its parent was killed")
            time.sleep(0.05)


    def test_a_daemon_given_a_root_that_is_no_directory_says_so_and_exits_2(self):
        daemon = subprocess.run([sys.executable, "-m", "lakeshore.daemon", "--queue", "q", "--root", "/no/such/dir", "--once"],
                                capture_output=True, text=True, timeout=30,
                                env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "client", "python"), LAKESHORE_URL="",
                                         LAKESHORE_HOME=self.temp_dir("lakeshore-daemon-home-")))
        self.assertEqual(daemon.returncode, 2, daemon.stderr)
        self.assertIn("--root /no/such/dir: no such directory (/no/such/dir)", daemon.stderr)

    def test_a_daemon_says_each_jobs_outcome_as_nodes_worker_does(self):
        # A terminal running `lakeshore worker start` for Python sees what one running Node's sees:
        # each job's outcome, and why one failed.
        home = self.temp_dir("lakeshore-daemon-home-")
        root = self.temp_dir("lakeshore-daemon-root-")
        with open(os.path.join(root, "said.py"), "w") as f:
            f.write("def boom(x):\n    raise ValueError('bad input %r' % (x,))\n")
        d = ls.Dispatch(os.path.join(home, "dispatch.sqlite"))
        try:
            q = ls.SyncQueue("said", d)
            bad = q.submit_with({"max_retries": 0}, "said:boom", 3)
            env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "client", "python"), LAKESHORE_URL="", LAKESHORE_HOME=home)
            daemon = subprocess.run([sys.executable, "-m", "lakeshore.daemon", "--queue", "said", "--root", root, "--once"],
                                    capture_output=True, text=True, timeout=30, env=env)
            self.assertEqual(daemon.returncode, 0, daemon.stderr)
            self.assertIn("lakeshore.daemon: job %s attempt 1 failed: ValueError: bad input 3; not retried\n" % bad.id, daemon.stderr)
            self.assertIn("lakeshore.daemon: %s: failed\n" % bad.id, daemon.stderr)
            # With no --retries, the plane's budget (3 attempts), as a Node worker started by the same command.
            budgetless = q.submit("said:boom", 4)
            for _ in range(3):
                daemon = subprocess.run([sys.executable, "-m", "lakeshore.daemon", "--queue", "said", "--root", root, "--once"],
                                        capture_output=True, text=True, timeout=30, env=env)
                self.assertEqual(daemon.returncode, 0, daemon.stderr)
            self.assertIn("attempt 3 failed: ValueError: bad input 4; no attempts left", daemon.stderr)
            self.assertEqual((d.get(budgetless.id)["state"], d.get(budgetless.id)["attempt"]), ("failed", 3))
        finally:
            d.close()

    def test_a_daemon_says_the_plane_away_as_its_own_line_and_gives_up_when_told(self):
        with socket.socket() as s:  # a port nothing listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        daemon = subprocess.run([sys.executable, "-m", "lakeshore.daemon", "--queue", "away", "--url", "http://127.0.0.1:%d" % port,
                                 "--token", "t", "--give-up-after", "1"], capture_output=True, text=True, timeout=30,
                                env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "client", "python")))
        self.assertEqual(daemon.returncode, 8, daemon.stderr)
        lines = daemon.stderr.splitlines()
        self.assertTrue(lines and all(l.startswith("lakeshore.daemon: ") for l in lines), lines)
        self.assertIn("lakeshore.daemon: cannot reach the plane at http://127.0.0.1:%d" % port, daemon.stderr)

    def test_a_daemon_whose_stderr_is_gone_still_stops_on_sigterm(self):
        # Its supervisor gone, nothing reads the daemon's stderr: the line it writes on SIGTERM
        # fails, and must not keep the signal from stopping it (seen: such a daemon ran on for hours).
        env = dict(os.environ, LAKESHORE_HOME=self.temp_dir("lakeshore-daemon-home-"),
                   PYTHONPATH=os.path.join(ROOT, "client", "python"))
        env.pop("LAKESHORE_URL", None)
        daemon = subprocess.Popen([sys.executable, "-m", "lakeshore.daemon", "--queue", "deaf"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: daemon.poll() is None and daemon.kill())
        self.assertIn("serving deaf", daemon.stderr.readline())
        daemon.stderr.close()
        daemon.terminate()
        self.assertEqual(daemon.wait(10), 0)


_HELD_WORKER = """
import os, sys, time
import lakeshore as ls
db, gate, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])

def held(n):
    print("running %d" % n, flush=True)
    end = time.monotonic() + 60
    while not os.path.exists(gate) and time.monotonic() < end:
        time.sleep(0.02)
    return n

ls.run_worker(ls.Dispatch(db), "ctrl-c", {"held": held}, concurrency=concurrency)
"""


class InterruptedWorker(TempDirs):
    """Ctrl-C on a program running run_worker: a real SIGINT to a real process. The first stops its
    claims and lets the running jobs end; a second puts them back in the queue at once."""

    def start(self, concurrency: int, jobs: int):
        home = self.temp_dir("lakeshore-ctrl-c-")
        db, gate = os.path.join(home, "jobs.sqlite"), os.path.join(home, "gate")
        d = ls.Dispatch(db)
        self.addCleanup(d.close)
        ids = [d.submit("ctrl-c", ls.encode_envelope("held", [i]), id="held-%d" % i) for i in range(jobs)]
        # A program started from a shell script in the background ignores SIGINT: this one takes it
        # as a terminal's Ctrl-C would deliver it.
        p = subprocess.Popen([sys.executable, "-c", _HELD_WORKER, db, gate, str(concurrency)],
                             env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "client", "python")),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.addCleanup(lambda: p.poll() is None and p.kill())
        out: list = []
        err: list = []
        for stream, lines in ((p.stdout, out), (p.stderr, err)):
            threading.Thread(target=lambda s=stream, l=lines: [l.append(x) for x in s], daemon=True).start()
        wait_until(lambda: len(out) == concurrency, lambda: "%d jobs running, saw %r %r" % (concurrency, out, err), 30)
        return d, ids, p, gate, err

    def test_a_first_interrupt_lets_the_running_job_end_and_claims_no_more(self):
        d, ids, p, gate, err = self.start(1, 3)
        p.send_signal(signal.SIGINT)
        wait_until(lambda: any("interrupted" in l for l in err), lambda: "the worker to say it was interrupted: %r" % err)
        self.assertIsNone(p.poll(), "the worker ended with its job still running: %r" % err)
        open(gate, "w").close()
        self.assertEqual(p.wait(30), -signal.SIGINT, "".join(err))  # the interrupt raised, once the job ended
        self.assertIn("KeyboardInterrupt", "".join(err))
        rows = [d.get(i) for i in ids]
        self.assertEqual([(r["state"], r["attempt"]) for r in rows], [("succeeded", 1), ("queued", 0), ("queued", 0)])

    def test_a_second_interrupt_puts_the_running_jobs_back_at_once(self):
        d, ids, p, gate, err = self.start(2, 3)
        p.send_signal(signal.SIGINT)
        wait_until(lambda: any("interrupted" in l for l in err), lambda: "the worker to say it was interrupted: %r" % err)
        self.assertIn("finishing the 2 jobs it runs", "".join(err))
        p.send_signal(signal.SIGINT)
        self.assertEqual(p.wait(30), -signal.SIGINT, "".join(err))
        # Back now, not at their leases' end (30 s): claimable, the interrupted attempt charged.
        rows = [d.get(i) for i in ids]
        self.assertEqual(sorted((r["state"], r["attempt"]) for r in rows), [("queued", 0), ("queued", 1), ("queued", 1)])
        self.assertEqual(sorted((r["error"] or {}).get("type", "") for r in rows), ["", "Interrupted", "Interrupted"])
        again = d.claim("ctrl-c", "next", wait=0)
        self.assertEqual((again.attempt, again.budget_attempt), (2, 2))


def _alive(pid: int) -> bool:
    """The process runs (a zombie, ended but not yet reaped by its new parent, does not)."""
    if not os.path.isdir("/proc"):
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class ThreeLines(TempDirs):
    """The contract's example, run as written: `q = SyncQueue("gpu")` on the process-default
    plane (a file, $LAKESHORE_HOME/dispatch.sqlite, or the edge plane of LAKESHORE_URL), then
    `run_worker(q, root="/data")`; the job's module is importable from the worker's path."""

    SCRIPT = 'from dreamlake.lakeshore import Dispatch, HttpDispatch, SyncQueue, run_worker\nq = SyncQueue("gpu")                                  # process-default plane\nrun_worker(q, root="/data")\n'

    def serve(self, d, env):
        """Runs the lines in a process of their own while `d` submits a job to "gpu" and waits for it."""
        tasks = self.temp_dir("lakeshore-pytasks-")
        with open(os.path.join(tasks, "three_line_tasks.py"), "w") as f:
            f.write("def double(x):\n    return 2 * x\n")
        env = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([os.path.join(os.path.dirname(__file__), ".."), tasks])}
        h = ls.SyncQueue("gpu", dispatch=d).submit("three_line_tasks:double", 21)
        p = subprocess.Popen([sys.executable, "-c", self.SCRIPT], env=env)
        try:
            self.assertEqual(h.result(timeout=30), 42)
        finally:
            p.kill()
            p.wait()

    def test_the_three_lines_serve_a_local_file(self):
        home = self.temp_dir("lakeshore-py3-")
        d = ls.Dispatch(os.path.join(home, "dispatch.sqlite"))
        self.addCleanup(d.close)
        self.serve(d, {"LAKESHORE_HOME": home, "LAKESHORE_URL": "", "LAKESHORE_NAMESPACE": ""})

    @unittest.skipUnless(os.environ.get("LAKESHORE_URL"), "needs LAKESHORE_URL (the suite's wrangler dev)")
    def test_the_three_lines_serve_the_edge_plane(self):
        ns = "py3" + os.urandom(6).hex()
        d = ls.HttpDispatch(os.environ["LAKESHORE_URL"], token=os.environ["LAKESHORE_TOKEN"], namespace=ns)
        self.serve(d, {"LAKESHORE_NAMESPACE": ns})


if __name__ == "__main__":
    unittest.main()


class ReadmeOnTheLocalPlane(TempDirs):
    """The README's snippets that need no plane URL run as written with none set: on the local plane."""

    def test_every_python_snippet_of_the_readme_that_names_no_url_runs_verbatim_on_the_local_plane(self):
        import re
        with open(os.path.join(os.path.dirname(__file__), "..", "README.md"), encoding="utf-8") as f:
            # Not the push receiver either: a server, run against the plane that pushes to it (test_http).
            blocks = [b for b in re.findall(r"```python\n(.*?)```", f.read(), re.S)
                      if "os.environ[\"LAKESHORE_URL\"]" not in b and not b.startswith("# receiver.py")]
        self.assertGreaterEqual(len(blocks), 1)
        env = {k: v for k, v in os.environ.items() if k not in ("LAKESHORE_URL", "LAKESHORE_TOKEN", "LAKESHORE_NAMESPACE")}
        env.update({"PYTHONPATH": os.path.join(os.path.dirname(__file__), ".."), "LAKESHORE_HOME": self.temp_dir("lakeshore-readme-")})
        for block in blocks:
            want = [m.group(1).strip() for m in re.finditer(r"^print\(.*\)\s+#\s*(.*)$", block, re.M)]
            out = subprocess.run([sys.executable, "-c", block], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(out.stdout.strip().splitlines(), want, block)
