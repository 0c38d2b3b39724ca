"""Test helpers shared by the Python suites."""
import os
import shutil
import subprocess
import tempfile
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
