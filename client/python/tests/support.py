"""Test helpers shared by the Python suites."""
import shutil
import tempfile
import unittest


class TempDirs(unittest.TestCase):
    """`self.temp_dir(prefix)`: a fresh directory, removed when the test ends."""

    def temp_dir(self, prefix: str) -> str:
        path = tempfile.mkdtemp(prefix=prefix)
        self.addCleanup(shutil.rmtree, path, True)
        return path
