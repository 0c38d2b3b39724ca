"""HttpDispatch's kept connections (lakeshore/http.py, _Pool), against a loopback HTTP/1.1 server
that plays what the real plane does only under faults: it closes a kept connection while it is
idle, and holds a streamed answer's tail open. (test_http.py runs the real plane through them.)"""
import json
import logging
import os
import sys
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import lakeshore as ls  # noqa: E402


class _Plane(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.connections = 0
        self.requests = []
        self.close_after = set()  # request numbers after whose answer the server hangs up
        self.tail = threading.Event()  # a streamed answer's tail waits for it
        self.finished = 0

    @property
    def url(self) -> str:
        return "http://127.0.0.1:%d" % self.server_address[1]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Plane

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def log_message(self, *args) -> None:
        pass

    def _json(self, status: int, value: dict) -> None:
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.requests.append(self.path)
        n = len(self.server.requests)
        codes = {"/fenced": "unavailable", "/limited": "rate_limited", "/refused": "not_found"}
        code = next((c for p, c in codes.items() if self.path.endswith(p)), None)
        if code == "not_found" or (code is not None and n == 1):
            # A claim that waited, then was refused: its answer streamed, the refusal its line.
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            line = b' {"error": {"code": "%s", "message": "refused"}}\n' % code.encode()
            for piece in (line, b"  "):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path.endswith("/claim") or code is not None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in (b" ", b'{"claimed": []}\n'):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
            self.server.tail.wait(10)
            self.wfile.write(b"1\r\n \r\n0\r\n\r\n")
        else:
            self._json(200, {"id": "j%d" % n, "n": n})
        self.wfile.flush()
        self.server.finished += 1
        if n in self.server.close_after:
            self.close_connection = True


def _until(check, what: str, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.005)


class KeptConnections(unittest.TestCase):
    def setUp(self) -> None:
        self.plane = _Plane()
        threading.Thread(target=self.plane.serve_forever, daemon=True).start()
        self.d = ls.HttpDispatch(self.plane.url, token="t", namespace="n", retry_for=2.0)

    def tearDown(self) -> None:
        self.d.close()
        self.plane.shutdown()
        self.plane.server_close()

    def test_calls_one_after_another_share_one_connection(self):
        for i in range(20):
            self.assertEqual(self.d.submit("q", b"{}", id="a%d" % i), "j%d" % (i + 1))
        self.assertEqual(self.plane.connections, 1)

    def test_a_kept_connection_the_plane_closed_is_replaced_without_a_word(self):
        self.d.submit("q", b"{}", id="a")
        self.plane.close_after.add(2)
        self.d.submit("q", b"{}", id="b")
        _until(lambda: self.plane.finished == 2, "the second answer")
        said = []
        log = logging.getLogger("lakeshore")
        told = logging.Handler(logging.WARNING)
        told.emit = said.append  # type: ignore[method-assign]
        log.addHandler(told)
        try:
            self.assertEqual(self.d.submit("q", b"{}", id="c"), "j3")
        finally:
            log.removeHandler(told)
        self.assertEqual(said, [])
        self.assertEqual(self.plane.connections, 2)

    def test_a_streamed_answer_gives_its_connection_back_only_after_its_tail(self):
        d = self.d
        self.assertEqual(d._call("POST", "/queues/q/claim", {}, wait=1.0), {"claimed": []})
        # The tail is still open: another call cannot use that connection.
        self.assertEqual(d.submit("q", b"{}", id="a"), "j2")
        self.assertEqual(self.plane.connections, 2)
        self.plane.tail.set()
        _until(lambda: self.plane.finished == 2 and len(d._pool._idle) == 2, "the tail read and its connection back")
        for i in range(5):
            d.submit("q", b"{}", id="b%d" % i)
        self.assertEqual(self.plane.connections, 2)

    def test_a_streamed_refusal_is_retried_when_a_refusal_would_be(self):
        # 503 (its queue fenced by a move while it waited) and 429: tried again, and the second answers.
        for what in ("fenced", "limited"):
            self.plane.requests.clear()
            self.assertEqual(self.d._call("POST", "/queues/q/" + what, {}, wait=1.0), {"claimed": []})
            self.assertEqual(len(self.plane.requests), 2)
        # Any other: raised at once.
        with self.assertRaises(ls.NotFound):
            self.d._call("POST", "/queues/q/refused", {}, wait=1.0)


if __name__ == "__main__":
    unittest.main()
