"""The HTTP client's operator verbs (http.py): the overview, listings, storage and metrics, the
lifecycle feed, pushed code, worker logs, stream tokens, queue settings, pause and resume, redrive,
purge, schedules and a namespace's move to another shard."""
import base64
import json
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from .checks import KEEP, MAX_NAMED_QUEUES
from .errors import BadRequest, LakeshoreError
from .pages import merge_metric_pages, merge_worker_pages, more_pages_after
from .wire import Transport, _b64, _error_of, _finite, _open_stream, _queue, _seg, _sse_ids, _unb64


def _schedule(s: Dict[str, Any]) -> Dict[str, Any]:
    return {**s, "envelope": _unb64(s.get("envelope"))}


class HttpOperatorVerbs(Transport):
    """Mixed into HttpDispatch: the verbs an operator and a dashboard use, beside the job verbs."""

    def purge(self, queue: str, *, state: str, limit: Optional[int] = None) -> int:
        """Deletes up to `limit` (default and most 1,000) finished jobs of one `state` (succeeded,
        failed or cancelled) of `queue`, oldest submitted first; answers how many. An admin token's verb."""
        return int(self._call("POST", "/queues/%s/purge" % _queue(queue), {"state": state, "limit": limit})["purged"])

    def list_queues(self) -> List[str]:
        """The queues of the namespace that ever held work or settings: the names alone (GET
        /queue-names, 1,000 a page), no queue's counts read."""
        return [str(q) for q in self._pages("/queue-names", "queues")]

    def overview(self, queues: Optional[List[str]] = None) -> List[Dict[str, Any]]:
        """Each queue (or those named, in that order): `{"queue", "paused", "settings", "counts":
        {"delayed", "queued", "running", "succeeded", "failed", "cancelled"}, "capped",
        "oldest_queued_ms", "recent", "pushing"}`: succeeded and cancelled are counted up to 10,000
        (`capped` names those at the cap); `oldest_queued_ms` is how long the longest-waiting job
        has waited, or None; `recent` is `{"bucket_ms", "until", "succeeded": [...], "failed":
        [...]}`, the jobs finished per 10 s over the last 5 minutes. A queue named that never held
        work is answered empty, as the local plane answers it."""
        if not queues:
            return self._pages("/queues", "queues")
        # Only the queues named are read (?queue=, up to 100 a request), each once; one that never
        # held work is answered empty by the plane.
        for q in queues:
            _seg("queue", q)  # an empty name is refused here, as the plane would
        names = list(dict.fromkeys(queues))
        by_name: Dict[str, Dict[str, Any]] = {}
        for i in range(0, len(names), MAX_NAMED_QUEUES):
            part = urllib.parse.urlencode([("queue", q) for q in names[i:i + MAX_NAMED_QUEUES]])
            for q in self._call("GET", "/queues?" + part)["queues"]:
                by_name[q["queue"]] = q
        missing = [q for q in queues if q not in by_name]
        if missing:
            raise LakeshoreError("the plane's overview left out the queue %r it was asked for" % missing[0])
        return [by_name[name] for name in queues]

    def overview_page(self, *, after: Optional[str] = None, limit: Optional[int] = None) -> Dict[str, Any]:
        """One page of the namespace's queues' overviews, in name order after `after` (None: the
        first page): `limit` of them (1 to 100, the default), as `{"queues": [...], "next"}`, `next`
        the `after` of the next page (None: this was the last). One request."""
        q = ([("after", after)] if after else []) + ([] if limit is None else [("limit", str(limit))])
        j = self._call("GET", "/queues" + ("?" + urllib.parse.urlencode(q) if q else ""))
        return {"queues": list(j["queues"]), "next": j.get("next") if isinstance(j.get("next"), str) else None}

    def get_many(self, ids: List[str]) -> List[Optional[Dict[str, Any]]]:
        """Up to 1,000 jobs at once, in the order asked, in one request: each one's row without
        envelope and result (as a listing gives it), or None where there is no such job."""
        return list(self._call("POST", "/invocations/get", {"ids": ids})["items"])

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

    def shards(self) -> List[Dict[str, Any]]:
        """The deployment's shards, the root token's view: each `{"shard", "bytes", "limit_bytes",
        "high_water_bytes", "full", "namespaces"}`, its storage against its budget and how many
        namespaces live on it."""
        return list(self._call("GET", "/v1/shards")["shards"])

    def shard_namespaces(self, shard: str) -> List[Dict[str, Any]]:
        """The namespaces on one shard, in name order: each `{"namespace", "state", "placed_at"}`,
        `state` active or moving (every page of GET /v1/shards/:shard/namespaces; the root token)."""
        return self._pages("/v1/shards/%s/namespaces" % _seg("shard", shard), "namespaces")

    def move_namespace(self, to: str, *, on_progress: Optional[Callable[[Dict[str, Any]], None]] = None,
                       wait: float = 30.0) -> Dict[str, Any]:
        """Moves this namespace's rows to another shard (`to`: DB, DB_1, ...; docs/deploy.md,
        "Moving a namespace"), the root token's verb: its writes wait a moment (503s the clients
        retry), nothing is lost or repeated. The plane moves it in steps of its own; this waits for
        the end, calling `on_progress` with the status after each wait (every `wait` seconds, at
        most 60), and answers the last status (`move_status`). Raises LakeshoreError if the move
        was undone (the namespace stays where it was), FencingConflict (409) if it is on `to`
        already or a move of it is under way."""
        m = self._call("POST", "/move", {"to": to})
        while m["state"] == "moving":
            if on_progress is not None:
                on_progress(dict(m))
            m = self.move_status(wait=wait)
        if m["state"] == "undone":
            raise LakeshoreError("the move of %s to %s was undone, and it stays on %s: %s" % (m["namespace"], m["to"], m["from"], m["error"]))
        return dict(m)

    def move_status(self, *, wait: float = 0.0) -> Dict[str, Any]:
        """Where this namespace's move is (the last one, once ended): `{"namespace", "from", "to",
        "state", "phase", "jobs", "frames", "queues", "schedules", "objects", "caught_up",
        "fenced_ms", "ms", "steps", "most_subrequests_a_step", "rows_read", "error"}`, `state` one of
        moving, moved, undone (docs/contract.md). `wait`: answer once it ends, or that many seconds
        (at most 60) have passed. NotFound if it was never moved. The root token's verb."""
        if not (0 <= wait <= 60):
            raise BadRequest("wait must be between 0 and 60 seconds")
        ms = int(wait * 1000)
        return dict(self._call("GET", "/move" + ("?wait_ms=%d" % ms if ms else ""), wait=wait))

    def metrics(self) -> str:
        """The namespace's metrics in the Prometheus text format (docs/contract.md, "Metrics")."""
        pages: List[str] = []
        after: Optional[str] = ""
        while after is not None:
            path = "/metrics" + ("?after=" + urllib.parse.quote(after, safe="") if after else "")
            req = urllib.request.Request(self._url(path), headers=self._headers())
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    pages.append(resp.read().decode("utf-8"))
            except urllib.error.HTTPError as e:
                raise _error_of(e)
            after = more_pages_after(pages[-1])
        return pages[0] if len(pages) == 1 else merge_metric_pages(pages)

    def events(self, queue: Optional[str] = None, *, kinds: Optional[List[str]] = None,
               stop: Optional[threading.Event] = None) -> Iterator[Dict[str, Any]]:
        """The lifecycle feed of `queue` (None: of every queue of the namespace), live: a record
        per committed transition, each queue's in commit order (`{"kind": "job", "id", "queue",
        "status", "attempt", "worker_id", "error"?, "at"}`, and `{"kind": "worker", ...}`; `kinds`
        keeps only some), until `stop` is set (checked between records and keepalives). After a
        dropped connection it resumes where it was (Last-Event-ID); `{"kind": "gap", ...}` says
        records were missed (or, for a queue that started meanwhile, may be) and the caller should
        list again. The records come in batches (`?batch=1`), handed out one by one."""
        params = {} if queue is None else {"queue": queue}
        if kinds:
            params["kinds"] = ",".join(kinds)
        # records in batches: one `records` event (a JSON array) for those that went out together
        params["batch"] = "1"
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
                    if event == "records":
                        for record in json.loads(data):
                            yield record
                            if stop and stop.is_set():
                                return
                    elif event in ("job", "worker"):
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

    def workers(self) -> List[Dict[str, Any]]:
        """The workers heard from lately, each once across the queues it works (`{"worker_id",
        "status", "queues", "host", "pid", "version", "concurrency", "first_seen", "last_seen",
        "holding"}`; docs/contract.md, "Workers")."""
        # A page answers the workers of up to 100 queues; one that works queues on two pages is merged here.
        return merge_worker_pages(self._pages("/workers", "workers"))

    def _pages(self, path: str, field: str) -> List[Any]:
        """Every page of a view the plane answers in pages (a namespace's queues, at most 100 a
        request, its calls to their objects being bounded; a shard's namespaces) and says which name
        to ask `after` next."""
        out: List[Any] = []
        after: Optional[str] = ""
        while after is not None:
            j = self._call("GET", path + ("?after=" + urllib.parse.quote(after, safe="") if after else ""))
            out.extend(j[field])
            after = j.get("next") if isinstance(j.get("next"), str) else None
        return out

    def worker_stopped(self, queue: str, worker_id: str) -> None:
        """Says this worker stops serving `queue` (run_worker does as it returns): the feed tells
        `stopped`, not `lost` a minute later. One try, with no retries: a stop is never held up by a
        plane that is away."""
        self._call("POST", "/queues/%s/workers/%s/stop" % (_queue(queue), _seg("worker_id", worker_id)), retry_for=0.0)

    def worker_log(self, queue: str, worker_id: str, lines: List[Dict[str, Any]]) -> None:
        """Puts log lines of this worker's jobs on the feed (`[{"id", "level", "message",
        "trace_id"?, "at"?}]`, at most 100; run_worker sends current_job().log's)."""
        self._call("POST", "/queues/%s/workers/%s/log" % (_queue(queue), _seg("worker_id", worker_id)), {"lines": lines})

    def stream_token(self, inv_id: str, *, ttl: Optional[float] = None, streams: Optional[int] = None) -> Dict[str, Any]:
        """A read-only token for one invocation, for a browser: `{"token", "url", "expires_at", "id",
        "queue", "streams"}`. Hand `url` (the journal's SSE URL, the token in its query) to an
        EventSource. `ttl` in seconds (default 15 minutes, at most 24 hours)."""
        body: Dict[str, Any] = {"ttl_ms": None if ttl is None else int(ttl * 1000), "streams": streams}
        return self._call("POST", "/invocations/%s/stream-token%s" % (_seg("id", inv_id), self._qs(inv_id)), body)

    # ------------------------------------------------------------------ operators

    def queue_info(self, queue: str) -> Dict[str, Any]:
        """`{"queue", "paused", "settings": {...}}`, settings in the wire's names and units (ms)."""
        return self._call("GET", "/queues/%s" % _queue(queue))

    def configure_queue(self, queue: str, *, lease_ms: Any = KEEP, max_attempts: Any = KEEP, max_running: Any = KEEP,
                        claims_per_second: Any = KEEP, retry_backoff: Any = KEEP, dead_letter_queue: Any = KEEP, ttl_ms: Any = KEEP,
                        retention_ms: Any = KEEP, journal_retention_ms: Any = KEEP, time_limit_ms: Any = KEEP, push: Any = KEEP) -> Dict[str, Any]:
        """Changes the settings named; None clears one (back to the plane's default). `retry_backoff`
        is a dict of `initial_ms`, `factor`, `max_ms`, `jitter`; `push` a dict of `url`, `concurrency`,
        `timeout_ms`, `rotate_secret` (the answer that sets it first or rotates carries
        `settings.push.secret`, once). Answers queue_info."""
        named = {"lease_ms": lease_ms, "max_attempts": max_attempts, "max_running": max_running, "claims_per_second": claims_per_second,
                 "retry_backoff": retry_backoff, "dead_letter_queue": dead_letter_queue, "ttl_ms": ttl_ms, "retention_ms": retention_ms,
                 "journal_retention_ms": journal_retention_ms, "time_limit_ms": time_limit_ms, "push": push}
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
        out = self._call("PUT", "/queues/%s/schedules/%s" % (_queue(queue), _seg("schedule name", name)), {
            "cron": cron, "timezone": timezone, "envelope": _b64(envelope), "priority": _finite("priority", priority)})
        return _schedule(out)

    def list_schedules(self, queue: str) -> List[Dict[str, Any]]:
        return [_schedule(s) for s in self._call("GET", "/queues/%s/schedules" % _queue(queue))["schedules"]]

    def remove_schedule(self, queue: str, name: str) -> None:
        self._call("DELETE", "/queues/%s/schedules/%s" % (_queue(queue), _seg("schedule name", name)))
