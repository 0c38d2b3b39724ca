"""Test helpers shared by the Python suites."""
import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
from typing import Callable, Dict, Tuple


def wait_until(check: Callable[[], bool], what: Callable[[], str], timeout: float = 10.0) -> None:
    """Waits, bounded, for `check()`; `what()` says what it waited for."""
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise AssertionError("timed out after %ss waiting for %s" % (timeout, what()))
        time.sleep(0.02)


class TempDirs(unittest.TestCase):
    """`self.temp_dir(prefix)`: a fresh directory, removed when the test ends."""

    def temp_dir(self, prefix: str) -> str:
        path = tempfile.mkdtemp(prefix=prefix)
        self.addCleanup(shutil.rmtree, path, True)
        return path

    def git_repo(self, files: Dict[str, str]) -> Tuple[str, Callable[..., str]]:
        """A fresh git repository whose first commit holds `files` (path -> text), and `git(...)` in it."""
        repo = self.temp_dir("lakeshore-pyrepo-")

        def git(*args: str) -> str:
            return subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "-c", "commit.gpgsign=false", *args],
                                  cwd=repo, check=True, capture_output=True).stdout.decode().strip()

        git("init", "-q")
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(repo, path)), exist_ok=True)
            with open(os.path.join(repo, path), "w") as f:
                f.write(text)
        git("add", ".")
        git("commit", "-qm", "one")
        return repo, git


def check_a_worker_says_who_it_is(test: unittest.TestCase, d) -> None:
    """run_worker on `d`: while its job runs, `d.workers()` lists it with what it said of itself
    (host, pid, version, slots: one a pool) and the job it holds; once it returned, as stopped."""
    import socket

    import lakeshore as ls

    seen = []
    ls.SyncQueue("who", dispatch=d).submit("look")
    ran = ls.run_worker(d, "who", {"look": lambda: seen.append(d.workers())}, once=True, worker_id="who-1", pools=["who", "other"])
    test.assertEqual(ran, 1)
    [w] = [w for w in seen[0] if w["worker_id"] == "who-1"]
    test.assertEqual((w["status"], w["host"], w["pid"], w["version"], w["concurrency"]),
                     ("active", socket.gethostname(), os.getpid(), ls.__version__, 2))
    test.assertEqual(w["queues"], ["who"])  # the queues that heard from it (it claimed on no other)
    test.assertEqual([h["queue"] for h in w["holding"]], ["who"])
    [after] = [w for w in d.workers() if w["worker_id"] == "who-1"]
    test.assertEqual(after["status"], "stopped")


def check_a_newer_claim_outlives_an_older_attempts_answer(test: unittest.TestCase, d, step: str, is_nack: Callable[..., bool]) -> None:
    """A job nacked for a retry can be claimed again by another thread of the same client (a
    worker's concurrency) before the nack's answer is read: the newer claim must stay this
    client's, so a call that names no attempt (a journal append, an ack) still finds it. `step`:
    the client's method every request goes through, wrapped so the second claim comes back
    between the nack reaching the plane and its answer being read; `is_nack(*args)` tells the
    nack's request."""
    from lakeshore.frames import VALUE, encode_frame

    d.submit("again", b"x", id="twice")
    test.assertEqual(d.claim("again", "w").attempt, 1)
    real, meanwhile = getattr(d, step), []

    def stepped(*a, **k):
        out = real(*a, **k)
        if is_nack(*a, **k) and not meanwhile:
            meanwhile.append(d.claim("again", "w"))
        return out

    setattr(d, step, stepped)
    test.assertEqual(d.nack("twice", "w", error="once more"), "queued")
    test.assertEqual((meanwhile[0].id, meanwhile[0].attempt), ("twice", 2))
    # No worker id, no attempt: the client's memory of its claim names them, the second attempt's.
    test.assertEqual(d.journal_append("twice", None, encode_frame(VALUE, 0, b'"v"')), 0)
    d.ack("twice", "w", result=b"done")
    row = d.get("twice")
    test.assertEqual((row["state"], row["attempt"], row["result"]), ("succeeded", 2, b"done"))
    test.assertEqual(len(d._claims), 0)  # the claim it ended is forgotten


def check_a_cancel_reaches_a_running_handler_within_moments(test: unittest.TestCase, d, worker) -> None:
    """A 30 s lease puts the heartbeat 10 s away: a job running under `worker` (the plane `d`, or
    a client of it with a worker token) hears its cancel from the worker's wait on its jobs'
    results, within 5 s, and ends cancelled."""
    import lakeshore as ls

    heard, began, cancelled_at = {}, threading.Event(), [0.0]

    def train():
        job = ls.current_job()
        began.set()
        job.stop.wait(30)
        heard["after"] = time.monotonic() - cancelled_at[0]
        return "saved"

    h = ls.SyncQueue("prompt", dispatch=d).submit("train")
    t = threading.Thread(target=lambda: ls.run_worker(worker, "prompt", {"train": train}, once=True, lease=30), daemon=True)
    t.start()
    try:
        test.assertTrue(began.wait(10))
        cancelled_at[0] = time.monotonic()
        test.assertTrue(h.cancel())
        t.join(8)
        test.assertLess(heard.get("after", 99), 5.0)
        test.assertEqual(h.get()["state"], "cancelled")
    finally:
        t.join(30)
