"""HttpDispatch: the dispatch contract over HTTP, with the standard library only."""
import base64
import http.client
import json
import logging
import math
import os
import random
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from .errors import BadRequest, InvocationCancelled, InvocationFailed, LakeshoreError, Timeout, Unavailable, error_for
from .frames import decode_frame, encode_frame

# A batch route takes 1,000 items and a 32 MiB body at most: send at most 500 items and ~30 MiB a request.
_PART_BYTES = 30 << 20


def _parts(bodies: List[Dict[str, Any]]) -> Iterator[List[Dict[str, Any]]]:
    """Splits request items into parts within the batch caps, by count and by encoded size."""
    part: List[Dict[str, Any]] = []
    size = 0
    for b in bodies:
        n = len(json.dumps(b)) + 1
        if part and (len(part) >= _BATCH or size + n > _PART_BYTES):
            yield part
            part, size = [], 0
        part.append(b)
        size += n
    if part:
        yield part


_log = logging.getLogger("lakeshore")

_SLICE = 50.0  # the longest single long-poll, in seconds; longer waits are made of several
_BATCH = 500  # items per submit_many request (the plane takes up to 1,000)


@dataclass
class Claimed:
    id: str
    envelope: bytes
    attempt: int
    queue: str
    lease_until: int = 0
    priority: float = 0.0


def _b64(b: Optional[bytes]) -> Optional[str]:
    return None if b is None else base64.b64encode(b).decode("ascii")


def _unb64(s: Optional[str]) -> Optional[bytes]:
    return None if s is None else base64.b64decode(s)


def _submit_body(envelope: bytes, id: str, key: Optional[str] = None, priority: float = 0.0, parent: Optional[str] = None, *,
                 delay: Optional[float] = None, run_at: Optional[float] = None, ttl: Optional[float] = None,
                 expires_at: Optional[float] = None, max_attempts: Optional[int] = None) -> Dict[str, Any]:
    """The submit wire body; times are seconds here (epoch seconds for `run_at`, `expires_at`) and ms on the wire."""
    body: Dict[str, Any] = {"id": id, "envelope": _b64(envelope), "key": key, "priority": _finite("priority", priority), "parent": parent}
    for name, v in (("delay_ms", delay), ("run_at", run_at), ("ttl_ms", ttl), ("expires_at", expires_at)):
        if v is not None:
            body[name] = _ms(name, v)
    if max_attempts is not None:
        body["max_attempts"] = max_attempts
    return body


def _ms(name: str, seconds: float) -> int:
    return int(round(_finite(name, seconds) * 1000))


class _Keep:
    """A setting left out of configure_queue: it keeps its value (None clears it)."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()


def _finite(name: str, v: float) -> float:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        raise error_for("bad_request", "%s must be a finite number" % name)
    return v


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


class HttpDispatch:
    """A client of a lakeshore edge plane.

    >>> d = HttpDispatch("http://127.0.0.1:8787", token="...", namespace="default")
    >>> inv = d.submit("gpu", b'{"fn": "train"}', id="job-1")
    >>> d.result(inv, timeout=60)
    """

    def __init__(self, base_url: str, *, token: Optional[str] = None, namespace: str = "default", timeout: float = 30.0, retry_for: float = 15.0,
                 stop: Optional[threading.Event] = None, max_backoff: float = 1.0):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.namespace = namespace
        self.timeout = timeout
        #: How long (s) to keep retrying a request whose connection failed, or that got 429/503.
        #: Every verb is safe to repeat (ids, fencing); 0 turns retries off; float("inf"): until the
        #: plane is back (a worker's daemon: it logs once when the plane goes away and once when back).
        self.retry_for = retry_for
        #: Set, it ends a wait for the plane at once (Unavailable): a worker told to stop during an outage.
        self.stop = stop
        self.max_backoff = max_backoff
        self._away_since: Optional[float] = None
        self._lock = threading.Lock()
        self._bookmark: Optional[str] = None
        self._queues: Dict[str, str] = {}  # id -> queue: a routing hint, never trusted for correctness
        self._claims: Dict[str, Tuple[str, int]] = {}  # id -> (worker id, attempt) of claims made here
        self._pool = _Pool(self.base_url)
        #: Code archives this client uploaded (push_code): a push of a tree the plane has is none.
        self.code_uploads = 0

    # ------------------------------------------------------------------ producers

    def submit(self, queue: str, envelope: bytes, *, id: str, key: Optional[str] = None, priority: float = 0.0, parent: Optional[str] = None,
               delay: Optional[float] = None, run_at: Optional[float] = None, ttl: Optional[float] = None,
               expires_at: Optional[float] = None, max_attempts: Optional[int] = None) -> str:
        """Submits one job. `delay` (seconds) or `run_at` (epoch seconds, as time.time()) keeps it
        delayed until then; `ttl` (seconds) or `expires_at` fails it as Expired if no worker claimed
        it by then (default: the queue's TTL); `max_attempts` is its own attempt budget."""
        out = self._call("POST", "/queues/%s/invocations" % _queue(queue), _submit_body(
            envelope, id, key, priority, parent, delay=delay, run_at=run_at, ttl=ttl, expires_at=expires_at, max_attempts=max_attempts))
        self._hint(out["id"], queue)
        return out["id"]

    def submit_many(self, queue: str, items: List[Dict[str, Any]]) -> List[Union[str, LakeshoreError]]:
        """Submits many in few requests (up to 500 items and about 30 MiB each): `items` are dicts
        with `envelope` (bytes) and `id`, and optionally `key`, `priority`, `parent` and submit's
        `delay`, `run_at`, `ttl`, `expires_at`, `max_attempts`. Each item keeps
        its own id, key and idempotency, and fails alone: the answer has, per item, its id or its
        error (not raised). A request the plane refuses whole answers its error for its items."""
        out: List[Union[str, LakeshoreError]] = []
        bodies = [_submit_body(**it) for it in items]
        for part in _parts(bodies):
            try:
                results = self._call("POST", "/queues/%s/invocations/batch" % _queue(queue), {"items": part})["results"]
            except LakeshoreError as e:
                out.extend(e for _ in part)
                continue
            for r in results:
                if "error" in r:
                    out.append(error_for(r["error"]["code"], r["error"]["message"]))
                else:
                    self._hint(r["id"], queue)
                    out.append(r["id"])
        return out

    def cancel(self, inv_id: str) -> bool:
        return bool(self._call("POST", "/invocations/%s/cancel%s" % (_q(inv_id), self._qs(inv_id)))["cancelled"])

    def get(self, inv_id: str) -> Optional[Dict[str, Any]]:
        try:
            row = self._call("GET", "/invocations/%s" % _q(inv_id))
        except LakeshoreError as e:
            if e.code == "not_found":
                return None
            raise
        for k in ("envelope", "result"):
            row[k] = _unb64(row.get(k))
        return row

    def result(self, inv_id: str, *, timeout: float = 30.0, poll: float = 0.02) -> bytes:
        """Blocks (on the plane's wait, not a poll loop) until the invocation ends; `poll` is accepted for compatibility."""
        if not (timeout >= 0):
            raise error_for("bad_request", "timeout must not be negative")
        deadline = time.monotonic() + timeout
        while True:
            left = max(0.0, deadline - time.monotonic())
            wait = min(left, _SLICE)
            out = self._call("GET", "/invocations/%s/result%s" % (_q(inv_id), self._qs(inv_id, timeout_ms=str(int(wait * 1000)))), wait=wait)
            state = out["state"]
            if state == "succeeded":
                return _unb64(out.get("result")) or b""
            if state == "failed":
                raise InvocationFailed(inv_id, out.get("error") or {"message": "failed"})
            if state == "cancelled":
                raise InvocationCancelled(inv_id)
            if time.monotonic() >= deadline:
                raise Timeout("invocation %s is still %s after %ss" % (inv_id, state, timeout))

    def count(self, queue: str, state: str = "queued") -> int:
        return int(self._call("GET", "/queues/%s/count?state=%s" % (_queue(queue), _q(state)))["count"])

    def retry(self, inv_id: str) -> None:
        """Puts a failed job back in its queue with a fresh attempt budget (same id, journal kept);
        a job in any other state raises FencingConflict."""
        self._call("POST", "/invocations/%s/retry%s" % (_q(inv_id), self._qs(inv_id)))

    def delete(self, inv_id: str) -> None:
        """Deletes a finished job (succeeded, failed or cancelled) and its frames; a job in any other
        state raises FencingConflict (cancel it first), a missing one NotFound."""
        self._call("DELETE", "/invocations/%s%s" % (_q(inv_id), self._qs(inv_id)))

    def purge(self, queue: str, *, state: str, limit: Optional[int] = None) -> int:
        """Deletes up to `limit` (default and most 1,000) finished jobs of one `state` (succeeded,
        failed or cancelled) of `queue`, oldest submitted first; answers how many. An admin token's verb."""
        return int(self._call("POST", "/queues/%s/purge" % _queue(queue), {"state": state, "limit": limit})["purged"])

    def list_queues(self) -> List[str]:
        return [str(q["queue"]) for q in self.overview()]

    def overview(self) -> List[Dict[str, Any]]:
        """Each queue: `{"queue", "paused", "settings", "counts": {"delayed", "queued", "running",
        "succeeded", "failed", "cancelled"}, "capped", "oldest_queued_ms", "recent"}`: succeeded and
        cancelled are counted up to 10,000 (`capped` names those at the cap); `oldest_queued_ms` is
        how long the longest-waiting job has waited, or None; `recent` is `{"bucket_ms", "until",
        "succeeded": [...], "failed": [...]}`, the jobs finished per 10 s over the last 5 minutes."""
        return list(self._call("GET", "/queues")["queues"])

    def list(self, queue: str, *, state: str = "queued", limit: int = 50, cursor: Optional[str] = None) -> Dict[str, Any]:
        """A page of the queue's jobs in `state`: `{"items": [row without envelope and result, ...],
        "cursor"}`; pass `cursor` back for the next page (None: that was the last). Claim order for
        queued, soonest first for running and delayed, newest first for finished states."""
        q = {"state": state, "limit": str(limit)}
        if cursor:
            q["cursor"] = cursor
        return self._call("GET", "/queues/%s/invocations?%s" % (_queue(queue), urllib.parse.urlencode(q)))

    def storage(self) -> Dict[str, Any]:
        """The namespace's database (its shard) against its storage budget: `{"shard", "bytes",
        "limit_bytes", "high_water_bytes", "full"}`; past the high-water mark submits raise StorageFull."""
        return dict(self._call("GET", "/storage"))

    def metrics(self) -> str:
        """The namespace's metrics in the Prometheus text format (docs/contract.md, "Metrics")."""
        req = urllib.request.Request(self._url("/metrics"), headers=self._headers())
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return resp.read().decode("utf-8")
        except urllib.error.HTTPError as e:
            raise _error_of(e)

    def events(self, queue: Optional[str] = None, *, kinds: Optional[List[str]] = None,
               stop: Optional[threading.Event] = None) -> Iterator[Dict[str, Any]]:
        """The lifecycle feed of `queue` (None: of every queue of the namespace), live: a record
        per committed transition, each queue's in commit order (`{"kind": "job", "id", "queue",
        "status", "attempt", "worker_id", "error"?, "at"}`, and `{"kind": "worker", ...}`; `kinds`
        keeps only some), until `stop` is set (checked between records and keepalives). After a
        dropped connection it resumes where it was (Last-Event-ID); `{"kind": "gap", ...}` says
        records were missed (or, for a queue that started meanwhile, may be) and the caller should
        list again."""
        params = {} if queue is None else {"queue": queue}
        if kinds:
            params["kinds"] = ",".join(kinds)
        path = "/events" + ("?" + urllib.parse.urlencode(params) if params else "")
        last: Optional[str] = None
        failures = 0
        while not (stop and stop.is_set()):
            headers = {**self._headers(), "Accept": "text/event-stream"}
            if last:
                headers["Last-Event-ID"] = last
            req = urllib.request.Request(self._url(path), headers=headers)
            resp, failures = _open_stream(req, 20.0, failures)
            if resp is None:
                continue
            try:
                for event, data, ident in _sse_ids(resp):
                    last = ident or last
                    if event in ("job", "worker"):
                        yield json.loads(data)
                    elif event == "gap":
                        yield {"kind": "gap", **json.loads(data)}
                    if stop and stop.is_set():
                        return
            except (OSError, ValueError):
                failures += 1
                time.sleep(min(1.0, 0.025 * 2 ** failures))
            finally:
                resp.close()

    def push_code(self, cwd: Optional[str] = None) -> str:
        """Pushes the git tree of `cwd` (default: the current directory) to the plane once per
        tree and answers its stamp, the tree hash (docs/code-mount.md): the plane is asked first
        (HEAD) and the archive (`git archive` of HEAD's tree) goes up only when it lacks it. A tree
        with uncommitted changes to tracked files is refused: commit them first."""
        import hashlib
        import subprocess

        def git(*args: str) -> bytes:
            r = subprocess.run(["git", *args], cwd=cwd or os.getcwd(), capture_output=True)
            if r.returncode != 0:
                raise BadRequest("git %s failed: %s" % (" ".join(args), r.stderr.decode("utf-8", "replace").strip()))
            return r.stdout

        # Each porcelain line is "XY PATH": two status columns (either may be a space), then the path.
        dirty = [line for line in git("status", "--porcelain", "--untracked-files=no").decode("utf-8").split("\n") if line.strip()]
        if dirty:
            raise BadRequest("the working tree has changes not committed (%d file(s), e.g. %s): push_code sends HEAD's tree; commit them first"
                             % (len(dirty), dirty[0][3:]))
        stamp = git("rev-parse", "HEAD^{tree}").decode("ascii").strip()
        head = urllib.request.Request(self._url("/code/%s" % stamp), method="HEAD", headers=self._headers())
        try:
            with urllib.request.urlopen(head, timeout=self.timeout):
                return stamp
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise _error_of(e)
        tar = git("archive", "--format=tar", stamp)
        digest = base64.b64encode(hashlib.sha256(tar).digest()).decode("ascii")
        put = urllib.request.Request(self._url("/code/%s" % stamp), data=tar, method="PUT", headers={
            **self._headers(), "Content-Type": "application/x-tar", "Content-Digest": "sha-256=:%s:" % digest})
        try:
            with urllib.request.urlopen(put, timeout=self.timeout):
                pass
        except urllib.error.HTTPError as e:
            raise _error_of(e)
        self.code_uploads += 1
        return stamp

    def fetch_code(self, stamp: str) -> Tuple[bytes, Optional[str]]:
        """A pushed tree's archive and the SHA-256 (hex) the plane keeps for it (a worker token)."""
        req = urllib.request.Request(self._url("/code/%s" % stamp), headers=self._headers())
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                data = resp.read()
                named = re.search(r"sha-256=:([A-Za-z0-9+/]+={0,2}):", resp.headers.get("Content-Digest") or "")
        except urllib.error.HTTPError as e:
            raise _error_of(e)
        return data, (base64.b64decode(named.group(1)).hex() if named else None)

    def worker_log(self, queue: str, worker_id: str, lines: List[Dict[str, Any]]) -> None:
        """Puts log lines of this worker's jobs on the feed (`[{"id", "level", "message",
        "trace_id"?, "at"?}]`, at most 100; run_worker sends current_job().log's)."""
        self._call("POST", "/queues/%s/workers/%s/log" % (_queue(queue), _q(worker_id)), {"lines": lines})

    def stream_token(self, inv_id: str, *, ttl: Optional[float] = None, streams: Optional[int] = None) -> Dict[str, Any]:
        """A read-only token for one invocation, for a browser: `{"token", "url", "expires_at", "id",
        "queue", "streams"}`. Hand `url` (the journal's SSE URL, the token in its query) to an
        EventSource. `ttl` in seconds (default 15 minutes, at most 24 hours)."""
        body: Dict[str, Any] = {"ttl_ms": None if ttl is None else int(ttl * 1000), "streams": streams}
        return self._call("POST", "/invocations/%s/stream-token%s" % (_q(inv_id), self._qs(inv_id)), body)

    # ------------------------------------------------------------------ operators

    def queue_info(self, queue: str) -> Dict[str, Any]:
        """`{"queue", "paused", "settings": {...}}`, settings in the wire's names and units (ms)."""
        return self._call("GET", "/queues/%s" % _queue(queue))

    def configure_queue(self, queue: str, *, lease_ms: Any = KEEP, max_attempts: Any = KEEP, max_running: Any = KEEP,
                        claims_per_second: Any = KEEP, retry_backoff: Any = KEEP, dead_letter_queue: Any = KEEP, ttl_ms: Any = KEEP,
                        retention_ms: Any = KEEP, time_limit_ms: Any = KEEP, push: Any = KEEP) -> Dict[str, Any]:
        """Changes the settings named; None clears one (back to the plane's default). `retry_backoff`
        is a dict of `initial_ms`, `factor`, `max_ms`, `jitter`; `push` a dict of `url`, `concurrency`,
        `timeout_ms`, `rotate_secret` (the answer that sets it first or rotates carries
        `settings.push.secret`, once). Answers queue_info."""
        named = {"lease_ms": lease_ms, "max_attempts": max_attempts, "max_running": max_running, "claims_per_second": claims_per_second,
                 "retry_backoff": retry_backoff, "dead_letter_queue": dead_letter_queue, "ttl_ms": ttl_ms, "retention_ms": retention_ms,
                 "time_limit_ms": time_limit_ms, "push": push}
        return self._call("PUT", "/queues/%s" % _queue(queue), {k: v for k, v in named.items() if v is not KEEP})

    def pause_queue(self, queue: str) -> None:
        """A paused queue takes submits but hands out nothing until resumed."""
        self._call("POST", "/queues/%s/pause" % _queue(queue))

    def resume_queue(self, queue: str) -> None:
        self._call("POST", "/queues/%s/resume" % _queue(queue))

    def redrive(self, queue: str, *, limit: Optional[int] = None, dead_letters: bool = False) -> List[Dict[str, str]]:
        """Retries up to `limit` (default 100) failed jobs of the queue, oldest first; with
        `dead_letters`, on a dead-letter queue, sends its dead letters' jobs back to their queues.
        Answers the retried jobs as `{"id", "queue"}`."""
        return self._call("POST", "/queues/%s/redrive" % _queue(queue), {"limit": limit, "dead_letters": dead_letters})["redriven"]

    def set_schedule(self, queue: str, name: str, *, cron: str, envelope: bytes, timezone: Optional[str] = None, priority: float = 0.0) -> Dict[str, Any]:
        """Each tick of `cron` (5 fields, or 6 with seconds first; read in `timezone`, default UTC)
        submits `envelope`, keyed `schedule:<name>:<tick ms>`."""
        out = self._call("PUT", "/queues/%s/schedules/%s" % (_queue(queue), _q(name)), {
            "cron": cron, "timezone": timezone, "envelope": _b64(envelope), "priority": _finite("priority", priority)})
        return _schedule(out)

    def list_schedules(self, queue: str) -> List[Dict[str, Any]]:
        return [_schedule(s) for s in self._call("GET", "/queues/%s/schedules" % _queue(queue))["schedules"]]

    def remove_schedule(self, queue: str, name: str) -> None:
        self._call("DELETE", "/queues/%s/schedules/%s" % (_queue(queue), _q(name)))

    # ------------------------------------------------------------------ workers

    def claim(self, queue: str, worker_id: str, *, kind: str = "fifo", temperature: float = 1.0, wait: float = 0.0, lease: Optional[float] = None,
              claim_id: Optional[str] = None) -> Optional[Claimed]:
        """Claims one invocation. `wait` (seconds, an extension) waits on the plane for work to
        arrive. A `claim_id` names the claim, so that another thread can call it off while it
        waits (cancel_claim)."""
        body: Dict[str, Any] = {
            "worker_id": worker_id, "kind": kind, "temperature": _finite("temperature", temperature),
            "wait_ms": int(wait * 1000), "lease_ms": None if lease is None else int(lease * 1000),
        }
        if claim_id is not None:
            body["claim_id"] = claim_id
        out = self._call("POST", "/queues/%s/claim" % _queue(queue), body, wait=wait)
        if not out["claimed"]:
            return None
        c = out["claimed"][0]
        claimed = Claimed(id=c["id"], envelope=_unb64(c["envelope"]) or b"", attempt=c["attempt"], queue=c["queue"], lease_until=c["lease_until"], priority=c["priority"])
        self._hint(claimed.id, claimed.queue)
        with self._lock:
            self._claims[claimed.id] = (worker_id, claimed.attempt)
        return claimed

    def cancel_claim(self, queue: str, worker_id: str, claim_id: str) -> bool:
        """Calls off this worker's claim named `claim_id`: while it waits it ends with no job, and a
        job it was answered moments ago goes back to the queue. False if there was nothing to call off."""
        return bool(self._call("POST", "/queues/%s/claim/cancel" % _queue(queue), {"worker_id": worker_id, "claim_id": claim_id})["cancelled"])

    def ack(self, inv_id: str, worker_id: str, *, result: Optional[bytes] = None) -> None:
        self._call("POST", "/invocations/%s/ack%s" % (_q(inv_id), self._qs(inv_id)), {"worker_id": worker_id, "attempt": self._attempt(inv_id, worker_id), "result": _b64(result)})
        with self._lock:
            self._claims.pop(inv_id, None)

    def nack(self, inv_id: str, worker_id: str, *, error: Union[str, Dict[str, Any]], retry: bool = True, delay: Optional[float] = None,
             max_attempts: Optional[int] = None) -> str:
        """Gives the job back. With `retry` it waits for another attempt (`delay` seconds, else its
        queue's backoff) while its budget lasts; else, or on its last attempt, it fails. Answers
        where it went: "queued", "delayed" or "failed"."""
        body: Dict[str, Any] = {"worker_id": worker_id, "attempt": self._attempt(inv_id, worker_id), "error": error, "retry": retry}
        if delay is not None:
            body["delay_ms"] = _ms("delay", delay)
        if max_attempts is not None:
            body["max_attempts"] = max_attempts  # the worker's budget: where neither the job nor its queue sets one
        out = self._call("POST", "/invocations/%s/nack%s" % (_q(inv_id), self._qs(inv_id)), body)
        with self._lock:
            self._claims.pop(inv_id, None)
        return str(out["state"])

    def heartbeat(self, inv_id: str, worker_id: str) -> bool:
        """Extends the lease; answers True when the invocation was cancelled (the worker should stop)."""
        out = self._call("POST", "/invocations/%s/heartbeat%s" % (_q(inv_id), self._qs(inv_id)), {"worker_id": worker_id, "attempt": self._attempt(inv_id, worker_id)})
        return bool(out["cancelled"])

    # ------------------------------------------------------------------ journal

    def journal_append(self, inv_id: str, seq: Optional[int], frame_bytes: bytes, *, final: bool = False) -> int:
        """Appends frame bytes (`[kind, seq, b64 body, meta]`) as the worker that claimed `inv_id` here."""
        kind, _, body, meta = decode_frame(frame_bytes)
        with self._lock:
            held = self._claims.get(inv_id)
        if not held:
            raise error_for("bad_request", "journal_append(%s): this client did not claim it" % inv_id)
        out = self._call("POST", "/invocations/%s/journal%s" % (_q(inv_id), self._qs(inv_id)), {
            "worker_id": held[0], "attempt": held[1], "seq": seq, "kind": kind, "body": _b64(body), "meta": meta, "final": bool(final),
        })
        return int(out["seq"])

    def journal_read(self, inv_id: str, *, since: int = -1, timeout: float = 30.0, poll: float = 0.02) -> Iterator[Tuple[int, bytes]]:
        """Yields (seq, frame bytes) as frames are written, over Server-Sent Events. After a dropped
        connection it resumes from the last seq it yielded. Ends after a final frame or when the
        invocation ends; raises Timeout when `timeout` seconds pass with no frame (each frame starts
        it again: a stream that keeps writing never times out). `poll` is accepted for the
        contract's signature and unused (the plane pushes)."""
        cursor = since
        deadline = time.monotonic() + timeout
        failures = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("journal of %s wrote nothing for %ss and has not ended" % (inv_id, timeout))
            req = urllib.request.Request(self._url("/invocations/%s/journal%s" % (_q(inv_id), self._qs(inv_id))), headers={
                **self._headers(), "Accept": "text/event-stream", "Last-Event-ID": str(cursor),
            })
            resp, failures = _open_stream(req, min(left, 20.0), failures)
            if resp is None:
                continue
            if resp.status == 204:  # the plane says this reader already had the end
                resp.close()
                return
            try:
                for event, data in _sse(resp, comments=True):
                    if event == "frame":
                        f = json.loads(data)
                        if f["seq"] <= cursor:
                            continue
                        cursor = f["seq"]
                        deadline = time.monotonic() + timeout
                        yield f["seq"], encode_frame(f["kind"], f["seq"], base64.b64decode(f["body"]), f.get("meta"))
                    elif event == "end":
                        return
                    elif event == "problem":
                        e = json.loads(data)["error"]
                        raise error_for(e["code"], e["message"])
                    if time.monotonic() >= deadline:
                        raise Timeout("journal of %s wrote nothing for %ss and has not ended" % (inv_id, timeout))
            except (OSError, ValueError) as e:
                if isinstance(e, LakeshoreError):
                    raise
                failures += 1
                time.sleep(min(1.0, 0.025 * 2 ** failures))
            finally:
                resp.close()

    def journal_trim(self, inv_id: str, *, keep_last: int = 0) -> int:
        return int(self._call("POST", "/invocations/%s/journal/trim%s" % (_q(inv_id), self._qs(inv_id)), {"keep_last": keep_last})["trimmed"])

    def close(self) -> None:
        """Forgets this client's claims and hints and closes its idle connections."""
        with self._lock:
            self._claims.clear()
            self._queues.clear()
        self._pool.close()

    def __enter__(self) -> "HttpDispatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing

    def _attempt(self, inv_id: str, worker_id: str) -> Optional[int]:
        with self._lock:
            held = self._claims.get(inv_id)
        return held[1] if held and held[0] == worker_id else None

    def _hint(self, inv_id: str, queue: str) -> None:
        with self._lock:
            if len(self._queues) >= 10000:
                self._queues.pop(next(iter(self._queues)))
            self._queues[inv_id] = queue

    def _qs(self, inv_id: str, **extra: str) -> str:
        params = dict(extra)
        with self._lock:
            queue = self._queues.get(inv_id)
        if queue:
            params["queue"] = queue
        return ("?" + urllib.parse.urlencode(params)) if params else ""

    def _url(self, path: str) -> str:
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

    def _call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None, *, wait: float = 0.0) -> Dict[str, Any]:
        data = None if body is None else json.dumps(body, allow_nan=False).encode("utf-8")
        headers = self._headers()
        if data is not None:
            headers["Content-Type"] = "application/json"
        target = urllib.parse.urlsplit(self._url(path))
        target_path = target.path + ("?" + target.query if target.query else "")
        give_up = time.monotonic() + self.retry_for
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
                if 200 <= resp.status < 300:
                    return _answer(resp, lambda whole: self._pool.give(conn) if whole else conn.close())
                err = _error_of_body(resp.status, resp.read())
                self._pool.give(conn)
                retry_after = float(resp.getheader("Retry-After") or 0) if resp.status == 429 else 0.0
                pause = max(backoff, retry_after)
                if resp.status not in (429, 503) or time.monotonic() + pause > give_up:
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
                                      % (self.base_url, why, int(self.retry_for))) from e
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


def _answer(resp: "http.client.HTTPResponse", done: Any) -> Dict[str, Any]:
    """A 2xx answer's JSON. A claim that waited streams its answer: whitespace, one JSON line, then
    a short tail that must be read to its end (a client that hangs up inside it gives its jobs
    back): the line is used at once and the tail read by a daemon thread. A streamed
    `{"error": {...}}` is that error. A plain answer has no newline and is read whole. `done(whole)`
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
        raise error_for(err["code"], err.get("message", "the plane failed the call"))
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


def _schedule(s: Dict[str, Any]) -> Dict[str, Any]:
    return {**s, "envelope": _unb64(s.get("envelope"))}


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


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
