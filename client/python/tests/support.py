"""Test helpers shared by the Python suites."""
import os
import shutil
import subprocess
import tempfile
import unittest
from typing import Callable, Dict, Tuple


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
