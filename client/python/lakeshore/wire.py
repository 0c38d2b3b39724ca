"""The HTTP client's wire (http.py): kept connections, calls with retries, the plane's answers and
errors, event streams, and the encodings the routes take."""
import base64
import http.client
import json
import logging
import math
import os
import random
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from .errors import BadRequest, LakeshoreError, Timeout, Unavailable, error_for

_log = logging.getLogger("lakeshore")


def _b64(b: Optional[bytes]) -> Optional[str]:
    return None if b is None else base64.b64encode(b).decode("ascii")


def _unb64(s: Optional[str]) -> Optional[bytes]:
    return None if s is None else base64.b64decode(s)


def _finite(name: str, v: float) -> float:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        raise error_for("bad_request", "%s must be a finite number" % name)
    return v


def _ms(name: str, seconds: float) -> int:
    return int(round(_finite(name, seconds) * 1000))


class _Pool:
    """Kept connections to one plane (HTTP/1.1 keep-alive), shared by the client's threads.

    A call takes an idle connection, or opens one, and gives it back only once its answer has been
    read to the end; a connection that failed is closed, never given back. urllib opened a
    connection per call (over HTTPS, a TLS handshake each): on loopback a submit took 1.34-1.45 ms
    and 199-219 us of CPU, kept 1.15-1.26 ms and 98-108 us.
    """

    _IDLE = 16  # idle connections kept at most; more are closed as they come back

    def __init__(self, base_url: str) -> None:
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise error_for("bad_request", "the plane's URL must be http(s)://host[:port], not %r" % base_url)
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port
        self._lock = threading.Lock()
        self._idle: List[http.client.HTTPConnection] = []
        self._pid = os.getpid()

    def take(self, timeout: float) -> Tuple[http.client.HTTPConnection, bool]:
        """A connection (an idle one if any: reused True) with its timeout set."""
        with self._lock:
            if self._pid != os.getpid():
                # A forked child: its parent's sockets are not its own to use (nor to close).
                self._idle, self._pid = [], os.getpid()
            conn = self._idle.pop() if self._idle else None
        reused = conn is not None
        if conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=timeout)
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn, reused

    def give(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self._IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def __del__(self) -> None:
        # A client dropped without close(): its idle connections go with it (no unclosed sockets).
        for conn in getattr(self, "_idle", []):
            conn.close()


class Transport:
    """Mixed into HttpDispatch: its calls to the plane. Uses the client's base_url, token,
    namespace, timeout, retry_for, stop and max_backoff, and its _lock, _bookmark, _away_since and
    _pool (set by HttpDispatch.__init__)."""

    base_url: str
    token: Optional[str]
    namespace: str
    timeout: float
    retry_for: float
    stop: Optional[threading.Event]
    max_backoff: float
    _lock: threading.Lock
    _bookmark: Optional[str]
    _away_since: Optional[float]
    _pool: _Pool

    def _url(self, path: str) -> str:
        # The deployment's routes (`/v1/shards`) are the plane's; the rest are the namespace's.
        if path.startswith("/v1/"):
            return self.base_url + path
        return "%s/v1/ns/%s%s" % (self.base_url, _q(self.namespace), path)

    def _headers(self) -> Dict[str, str]:
        h = {"Authorization": "Bearer %s" % self.token} if self.token else {}
        # The newest bookmark the plane answered: its reads then see this client's writes, even
        # from a read replica (docs/contract.md, "Reads and replicas").
        if self._bookmark:
            h["X-Lakeshore-Bookmark"] = self._bookmark
        return h

    def _note_bookmark(self, b: Optional[str]) -> None:
        if not b:
            return
        with self._lock:
            had = self._bookmark
            # Newer on the same shard; a bookmark of another shard (the namespace moved) replaces it.
            if not had or had.split(":", 1)[0] != b.split(":", 1)[0] or b > had:
                self._bookmark = b

    def _call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None, *, wait: float = 0.0,
              retry_for: Optional[float] = None) -> Dict[str, Any]:
        data = None if body is None else json.dumps(body, allow_nan=False).encode("utf-8")
        headers = self._headers()
        if data is not None:
            headers["Content-Type"] = "application/json"
        target = urllib.parse.urlsplit(self._url(path))
        target_path = target.path + ("?" + target.query if target.query else "")
        retry_for = self.retry_for if retry_for is None else retry_for
        give_up = time.monotonic() + retry_for
        attempt = 0
        while True:
            # Capped exponential backoff with jitter (half to all of the step).
            backoff = min(self.max_backoff, 0.025 * 2 ** min(attempt, 20)) * (0.5 + random.random() / 2)
            conn, reused = self._pool.take(self.timeout + wait)
            try:
                conn.request(method, target_path, body=data, headers=headers)
                resp = conn.getresponse()
                self._reached()
                self._note_bookmark(resp.getheader("X-Lakeshore-Bookmark"))
                status = resp.status
                if 200 <= status < 300:
                    out = _answer(resp, lambda whole: self._pool.give(conn) if whole else conn.close())
                    if not isinstance(out, LakeshoreError):
                        return out
                    # A streamed refusal (the claim waited, then its queue was fenced: 503) is
                    # retried as the same refusal unstreamed would be.
                    err, status = out, out.status
                else:
                    err = _error_of_body(status, resp.read())
                    self._pool.give(conn)
                if status == 401 and not self.token:
                    err = type(err)("%s (no token given: HttpDispatch(url, token=...), or set LAKESHORE_TOKEN)" % err)
                retry_after = float(resp.getheader("Retry-After") or 0) if status == 429 else 0.0
                pause = max(backoff, retry_after)
                if status not in (429, 503) or time.monotonic() + pause > give_up:
                    raise err
            except (TimeoutError, socket.timeout):
                conn.close()
                raise Timeout("%s %s got no answer within %ss" % (method, path, self.timeout + wait))
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                # A kept connection the plane had closed while it was idle: try once more on a new one.
                if reused and isinstance(e, (ConnectionError, http.client.RemoteDisconnected)):
                    continue
                # The plane is unreachable (restarting, say): say so at once, try again for a while.
                why = str(getattr(e, "reason", None) or e)
                pause = backoff
                if time.monotonic() + pause > give_up:
                    raise Unavailable("cannot reach the plane at %s: %s (tried for %ss). Is it running? Is the URL right?"
                                      % (self.base_url, why, int(retry_for))) from e
                self._lost(why)
            attempt += 1
            if self.stop is not None:
                if self.stop.wait(pause):
                    raise Unavailable("stopped while waiting for the plane at %s" % self.base_url)
            else:
                time.sleep(pause)

    def _lost(self, why: str) -> None:
        """No request reaches the plane: said once, however many wait (not once per request)."""
        with self._lock:
            if self._away_since is not None:
                return
            self._away_since = time.monotonic()
        until = "for up to %ss" % int(self.retry_for) if self.retry_for != float("inf") else "until it is back"
        _log.warning("cannot reach the plane at %s (%s); retrying %s", self.base_url, why, until)

    def _reached(self) -> None:
        with self._lock:
            since, self._away_since = self._away_since, None
        if since is not None:
            _log.warning("the plane at %s is back after %.1f s", self.base_url, time.monotonic() - since)


def _answer(resp: "http.client.HTTPResponse", done: Any) -> Union[Dict[str, Any], LakeshoreError]:
    """A 2xx answer's JSON. A claim that waited streams its answer: whitespace, one JSON line, then
    a short tail that must be read to its end (a client that hangs up inside it gives its jobs
    back): the line is used at once and the tail read by a daemon thread. A streamed
    `{"error": {...}}` is that error, answered (for the caller to retry or raise). A plain answer has no newline and is read whole. `done(whole)`
    is called once the answer is read: to its end (its connection may carry the next call), or not
    (its connection broke and is closed)."""
    line = resp.readline()
    if not line.endswith(b"\n"):
        resp.close()
        done(True)
        return json.loads(line.decode("utf-8")) if line else {}
    threading.Thread(target=_drain, args=(resp, done), daemon=True).start()
    out = json.loads(line.decode("utf-8"))
    err = out.get("error") if len(out) == 1 else None
    if isinstance(err, dict) and "code" in err:
        return error_for(err["code"], err.get("message", "the plane failed the call"))
    return out


def _drain(resp: Any, done: Any = None) -> None:
    whole = True
    try:
        while resp.read(4096):
            pass
    except (OSError, ValueError, http.client.HTTPException):
        whole = False  # the connection broke after the answer: it is not reused
    finally:
        resp.close()
    if done is not None:
        done(whole)


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _seg(what: str, s: str) -> str:
    """One segment of a path (an id, a worker id, a name), checked first as the plane checks it: an
    empty one would make a path with `//`, and `.` or `..` are resolved away by URLs (`/invocations/../ack`
    is `/ack`: Cloudflare's edge normalizes so), sending the call to another route."""
    if not isinstance(s, str) or not s:
        raise BadRequest("%s must not be empty" % what)
    if s in (".", ".."):
        raise BadRequest('%s must not be "." or "..": URLs resolve them away as path segments' % what)
    return _q(s)


def _queue(queue: str) -> str:
    """A queue's name in a path, checked first: an empty one would make a path the plane has no route for."""
    if not isinstance(queue, str) or not queue:
        raise BadRequest("queue must not be empty")
    return _q(queue)


def _error_of(e: "urllib.error.HTTPError") -> LakeshoreError:
    return _error_of_body(e.code, e.read())


def _error_of_body(status: int, body: bytes) -> LakeshoreError:
    """The plane's `{"error": {code, message}}` answer as its error class."""
    try:
        err = json.loads(body.decode("utf-8"))["error"]
        return error_for(err.get("code", "internal"), err.get("message", "HTTP %d" % status))
    except Exception:
        return LakeshoreError("HTTP %d" % status, status=status)


def _open_stream(req: "urllib.request.Request", timeout: float, failures: int) -> Tuple[Any, int]:
    """Opens an event stream: (response, 0). A refusal raises its error class; a connection that
    failed is waited out with backoff, (None, failures + 1), and raised after 20 in a row."""
    try:
        return urllib.request.urlopen(req, timeout=timeout), 0
    except urllib.error.HTTPError as e:
        raise _error_of(e)
    except (OSError, urllib.error.URLError):
        if failures >= 20:
            raise
        time.sleep(min(1.0, 0.025 * 2 ** (failures + 1)))
        return None, failures + 1


def _sse(resp: Any, comments: bool = False) -> Iterator[Tuple[str, str]]:
    """(event, data) pairs from a text/event-stream response; with `comments`, a keepalive comment
    is (":", "") (a reader with a deadline looks at the clock then)."""
    for event, data, _ in _sse_ids(resp, comments):
        yield event, data


def _sse_ids(resp: Any, comments: bool = False) -> Iterator[Tuple[str, str, Optional[str]]]:
    """(event, data, id) triples from a text/event-stream response."""
    event, data, ident = "message", [], None
    for raw in resp:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield event, "\n".join(data), ident
            event, data, ident = "message", [], None
        elif line.startswith(":"):
            if comments:
                yield ":", "", None
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
            elif field == "id":
                ident = value
