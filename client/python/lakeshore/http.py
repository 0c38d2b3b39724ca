"""HttpDispatch: the dispatch contract over HTTP, with the standard library only."""
import base64
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

from .checks import _ended
from .errors import InvocationCancelled, InvocationFailed, LakeshoreError, Timeout, error_for
from .frames import decode_frame, encode_frame
from .held import HeldClaims
from .lanes import Lane
from .http_operators import KEEP, HttpOperatorVerbs
from .wire import _b64, _finite, _ms, _open_stream, _Pool, _q, _queue, _seg, _sse, _unb64

__all__ = ["KEEP", "Claimed", "HttpDispatch"]

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
    #: Which attempt of the job's current budget this is (1 for its first): the attempt number less
    #: those not charged (a claim put back uncharged, every attempt before an operator's retry). What
    #: a worker's `retries` counts against (docs/contract.md, "The worker's budget"). None: the attempt.
    budget_attempt: Optional[int] = None

    def __post_init__(self) -> None:
        if self.budget_attempt is None:
            self.budget_attempt = self.attempt


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


class HttpDispatch(HttpOperatorVerbs):
    """A client of a lakeshore edge plane.

    >>> d = HttpDispatch("http://127.0.0.1:8787", token="...", namespace="default")
    >>> inv = d.submit("gpu", b'{"fn": "train"}', id="job-1")
    >>> d.result(inv, timeout=60)
    """

    def __init__(self, base_url: str, *, token: Optional[str] = None, namespace: str = "default", timeout: float = 30.0, retry_for: float = 15.0,
                 stop: Optional[threading.Event] = None, max_backoff: float = 1.0):
        if not isinstance(base_url, str):  # HttpDispatch(os.environ.get("LAKESHORE_URL")) with none set
            raise error_for("bad_request", "the plane's URL must be http(s)://host[:port], not %r" % (base_url,))
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
        self._claims = HeldClaims()  # the claims made here (held.py)
        self._lanes: Dict[Any, Lane] = {}  # its threads' calls that share requests, by what they share (lanes.py)
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
        item = {"envelope": envelope, "id": id, "key": key, "priority": priority, "parent": parent, "delay": delay, "run_at": run_at,
                "ttl": ttl, "expires_at": expires_at, "max_attempts": max_attempts}
        # With other threads' submits to the queue, while two requests are out.
        return self._lane(("submit", queue), lambda item: self._submit_one(queue, item), lambda items: self.submit_many(queue, items)).call(item)

    def _lane(self, key: Any, one: Callable[[Any], Any], many: Callable[[List[Any]], List[Any]]) -> Lane:
        with self._lock:
            lane = self._lanes.get(key)
            if lane is None:
                lane = self._lanes[key] = Lane(one, many)
            return lane

    def _submit_one(self, queue: str, item: Dict[str, Any]) -> str:
        out = self._call("POST", "/queues/%s/invocations" % _queue(queue), _submit_body(**item))
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
        return bool(self._call("POST", "/invocations/%s/cancel%s" % (_seg("id", inv_id), self._qs(inv_id)))["cancelled"])

    def get(self, inv_id: str) -> Optional[Dict[str, Any]]:
        try:
            row = self._call("GET", "/invocations/%s" % _seg("id", inv_id))
        except LakeshoreError as e:
            if e.code == "not_found":
                return None
            raise
        for k in ("envelope", "result"):
            row[k] = _unb64(row.get(k))
        return row

    def result(self, inv_id: str, *, timeout: Optional[float] = 30.0, poll: float = 0.02) -> bytes:
        """Blocks (on the plane's wait, not a poll loop) until the invocation ends, at most `timeout`
        seconds (None: as long as the job takes); `poll` is accepted for compatibility."""
        if timeout is not None and not (timeout >= 0):
            raise error_for("bad_request", "timeout must not be negative")
        deadline = float("inf") if timeout is None else time.monotonic() + timeout
        while True:
            left = max(0.0, deadline - time.monotonic())
            wait = min(left, _SLICE)
            out = self._call("GET", "/invocations/%s/result%s" % (_seg("id", inv_id), self._qs(inv_id, timeout_ms=str(int(wait * 1000)))), wait=wait)
            state = out["state"]
            if state == "succeeded":
                return _unb64(out.get("result")) or b""
            if state == "failed":
                raise InvocationFailed(inv_id, out.get("error") or {"message": "failed"})
            if state == "cancelled":
                raise InvocationCancelled(inv_id)
            if time.monotonic() >= deadline:
                raise Timeout("invocation %s is still %s after %ss" % (inv_id, state, timeout))

    def results(self, queue: str, ids: List[str], *, timeout: Optional[float] = 30.0, poll: float = 0.02) -> List[Dict[str, Any]]:
        """Waits on many jobs of `queue` at once (at most 1,000 ids), in one request: as soon as any
        has ended, each that has, as `{"id", "result": bytes}` or `{"id", "error": InvocationFailed,
        InvocationCancelled or NotFound}`; [] once `timeout` seconds (at most 300) passed with none.
        `poll` is accepted for the local plane's signature and unused (the plane wakes the wait)."""
        return self.results_page(queue, ids, timeout=timeout)[0]

    def results_page(self, queue: str, ids: List[str], *, timeout: Optional[float] = 30.0,
                     after: Optional[str] = None) -> Tuple[List[Dict[str, Any]], Optional[str]]:
        """`results`, and the plane's cursor: asked again with it as `after` for the rest, the plane
        reads again only the jobs that ended since (None: it keeps no cursor)."""
        wait = 30.0 if timeout is None else timeout
        number = isinstance(wait, (int, float)) and not isinstance(wait, bool)
        body = {"ids": list(ids) if isinstance(ids, (list, tuple)) else ids, "timeout_ms": int(wait * 1000) if number else wait,
                "after": after}  # the plane checks them
        out = self._call("POST", "/queues/%s/results" % _queue(queue), body, wait=max(0.0, wait) if number else 0.0)
        return [_ended({**r, "result": _unb64(r.get("result"))}, queue) for r in out["results"]], out.get("cursor")

    def count(self, queue: str, state: str = "queued") -> int:
        return int(self._call("GET", "/queues/%s/count?state=%s" % (_queue(queue), _q(state)))["count"])

    def retry(self, inv_id: str) -> None:
        """Puts a failed job back in its queue with a fresh attempt budget (same id, journal kept);
        a job in any other state raises FencingConflict."""
        self._call("POST", "/invocations/%s/retry%s" % (_seg("id", inv_id), self._qs(inv_id)))

    def delete(self, inv_id: str) -> None:
        """Deletes a finished job (succeeded, failed or cancelled) and its frames; a job in any other
        state raises FencingConflict (cancel it first), a missing one NotFound."""
        self._call("DELETE", "/invocations/%s%s" % (_seg("id", inv_id), self._qs(inv_id)))

    # ------------------------------------------------------------------ workers

    def claim(self, queue: str, worker_id: str, *, kind: str = "fifo", temperature: float = 1.0, wait: float = 0.0, lease: Optional[float] = None,
              poll: float = 0.02, claim_id: Optional[str] = None, worker: Optional[Dict[str, Any]] = None) -> Optional[Claimed]:
        """Claims one invocation. `wait` (seconds, an extension) waits on the plane for work to
        arrive. A `claim_id` names the claim, so that another thread can call it off while it
        waits (cancel_claim). `worker` is what the worker says of itself (`{"queues", "host",
        "pid", "version", "concurrency"}`, docs/contract.md "Workers"; run_worker sends it).
        `poll` is accepted for the local plane's signature and unused (the plane wakes the claim)."""
        got = self.claim_many(queue, worker_id, 1, kind=kind, temperature=temperature, wait=wait, lease=lease, claim_id=claim_id, worker=worker)
        return got[0] if got else None

    def claim_many(self, queue: str, worker_id: str, max: int, *, kind: str = "fifo", temperature: float = 1.0, wait: float = 0.0,
                   lease: Optional[float] = None, poll: float = 0.02, claim_id: Optional[str] = None,
                   worker: Optional[Dict[str, Any]] = None) -> List[Claimed]:
        """Claims up to `max` jobs (at most 1,000) in claim order, as claim does; waits up to `wait`
        seconds while there is none, and answers [] then."""
        body = self._claim_body(worker_id, max, kind, wait, lease)
        body["temperature"] = _finite("temperature", temperature)
        if claim_id is not None:
            body["claim_id"] = claim_id
        if worker is not None:
            body["worker"] = worker
        out = self._call("POST", "/queues/%s/claim" % _queue(queue), body, wait=wait)
        return self._claimed(worker_id, out["claimed"])

    def ack_and_claim(self, queue: str, worker_id: str, acks: List[Dict[str, Any]], max: int, *, kind: str = "fifo", wait: float = 0.0,
                      lease: Optional[float] = None) -> Tuple[List[Optional[LakeshoreError]], List[Claimed]]:
        """A worker's acks (`{"id", "attempt"?, "result"?}`, each fenced alone, on this queue) and
        its next claim, in one request: the acks land first; with acks aboard the claim waits at
        most 25 ms. Answers each ack's error (None where it landed) and the jobs claimed. Bad claim
        arguments refuse the whole call before any ack lands."""
        if wait <= 0 and max <= 1:
            # A worker's threads, each acking its job and claiming its next: those made while two
            # requests of them are out go together in the next, each answered its own acks' errors
            # and at most its one job.
            def together(calls: List[Tuple[List[Dict[str, Any]], int]]) -> List[Any]:
                answers, claimed = self._ack_and_claim(queue, worker_id, [a for acks_, _ in calls for a in acks_],
                                                       sum(n for _, n in calls), kind, 0.0, lease)
                out: List[Any] = []
                for acks_, n in calls:
                    mine, answers = answers[:len(acks_)], answers[len(acks_):]
                    got, claimed = claimed[:n], claimed[n:]
                    out.append((mine, got))
                return out
            key = ("ack_and_claim", queue, worker_id, kind, lease)
            return self._lane(key, lambda call: self._ack_and_claim(queue, worker_id, call[0], call[1], kind, 0.0, lease), together).call((acks, max))
        return self._ack_and_claim(queue, worker_id, acks, max, kind, wait, lease)

    def _ack_and_claim(self, queue: str, worker_id: str, acks: List[Dict[str, Any]], max: int, kind: str, wait: float,
                       lease: Optional[float]) -> Tuple[List[Optional[LakeshoreError]], List[Claimed]]:
        body = self._claim_body(worker_id, max, kind, wait, lease)
        items = [{"id": a["id"], "attempt": self._claims.attempt_of(a["id"], worker_id, a.get("attempt")),
                  "result": _b64(a.get("result"))} for a in acks]
        # The acks that fit one request ride the claim; any beyond go first, as batch acks in parts.
        parts = list(_parts(items)) or [[]]
        before: List[Dict[str, Any]] = []
        for part in parts[1:]:
            try:
                before += self._call("POST", "/queues/%s/ack" % _queue(queue),
                                     {"items": [{**it, "worker_id": worker_id} for it in part]})["results"]
            except LakeshoreError as e:
                before += [{"error": {"code": e.code, "message": e.message}} for _ in part]
        body["acks"] = parts[0]
        out = self._call("POST", "/queues/%s/claim" % _queue(queue), body, wait=wait)
        answers: List[Optional[LakeshoreError]] = []
        for it, r in zip(items, list(out["acks"]) + before):
            if "error" in r:
                answers.append(error_for(r["error"]["code"], r["error"]["message"]))
            else:
                answers.append(None)
                self._claims.done(it["id"], worker_id, it["attempt"])
        return answers, self._claimed(worker_id, out["claimed"])

    @staticmethod
    def _claim_body(worker_id: str, max: int, kind: str, wait: float, lease: Optional[float]) -> Dict[str, Any]:
        return {"worker_id": worker_id, "kind": kind, "max": max, "wait_ms": int(wait * 1000),
                "lease_ms": None if lease is None else int(lease * 1000)}

    def _claimed(self, worker_id: str, rows: List[Dict[str, Any]]) -> List[Claimed]:
        """The claimed jobs of an answer; each remembered as held by `worker_id` (its attempt and queue)."""
        out = []
        for c in rows:
            claimed = Claimed(id=c["id"], envelope=_unb64(c["envelope"]) or b"", attempt=c["attempt"], queue=c["queue"],
                              lease_until=c["lease_until"], priority=c["priority"], budget_attempt=c.get("budget_attempt"))
            self._hint(claimed.id, claimed.queue)
            self._claims.held(claimed.id, worker_id, claimed.attempt)
            out.append(claimed)
        return out

    def cancel_claim(self, queue: str, worker_id: str, claim_id: str) -> bool:
        """Calls off this worker's claim named `claim_id`: while it waits it ends with no job, and a
        job it was answered moments ago goes back to the queue. False if there was nothing to call off."""
        return bool(self._call("POST", "/queues/%s/claim/cancel" % _queue(queue), {"worker_id": worker_id, "claim_id": claim_id})["cancelled"])

    def release(self, queue: str, worker_id: str, items: List[Dict[str, Any]]) -> List[str]:
        """Gives back jobs of `queue` this worker claimed and never started (it is stopping, say):
        each still its own at that attempt (`{"id", "attempt"?}`; default the one this client
        claimed) goes back to the queue, its attempt not charged, unlike a nack's. Answers the ids
        put back; the others are no longer the worker's and stay as they are."""
        handed = [{"id": _seg("id", it["id"]), "attempt": self._attempt(it["id"], worker_id, it.get("attempt"))} for it in items]
        back = [str(i) for i in self._call("POST", "/queues/%s/release" % _queue(queue), {"worker_id": worker_id, "items": handed})["released"]]
        for it in handed:
            if it["id"] in back:
                self._claims.done(it["id"], worker_id, it["attempt"])
        return back

    def ack(self, inv_id: str, worker_id: str, *, result: Optional[bytes] = None, attempt: Optional[int] = None, queue: Optional[str] = None) -> None:
        """Finishes the job with its result, as the worker holding it: `attempt` (the fencing token)
        defaults to the one this client claimed; `queue`, when given, narrows the guard."""
        attempt = self._attempt(inv_id, worker_id, attempt)
        self._call("POST", "/invocations/%s/ack%s" % (_seg("id", inv_id), self._qs(inv_id, queue=queue)),
                   {"worker_id": worker_id, "attempt": attempt, "result": _b64(result)})
        self._claims.done(inv_id, worker_id, attempt)

    def nack(self, inv_id: str, worker_id: str, *, error: Union[str, Dict[str, Any]], retry: bool = True, delay: Optional[float] = None,
             attempt: Optional[int] = None, max_attempts: Optional[int] = None) -> str:
        """Gives the job back. With `retry` it waits for another attempt (`delay` seconds, else its
        queue's backoff) while its budget lasts; else, or on its last attempt, it fails. Answers
        where it went: "queued", "delayed" or "failed". `attempt` as ack's."""
        body: Dict[str, Any] = {"worker_id": worker_id, "attempt": self._attempt(inv_id, worker_id, attempt), "error": error, "retry": retry}
        if delay is not None:
            body["delay_ms"] = _ms("delay", delay)
        if max_attempts is not None:
            body["max_attempts"] = max_attempts  # the worker's budget: where neither the job nor its queue sets one
        out = self._call("POST", "/invocations/%s/nack%s" % (_seg("id", inv_id), self._qs(inv_id)), body)
        self._claims.done(inv_id, worker_id, body["attempt"])
        return str(out["state"])

    def heartbeat(self, inv_id: str, worker_id: str, *, lease: Optional[float] = None, attempt: Optional[int] = None) -> bool:
        """Extends the lease (by `lease` seconds, else the queue's); answers True when the invocation
        was cancelled (the worker should stop). `attempt` as ack's."""
        return self.heartbeat_lease(inv_id, worker_id, lease=lease, attempt=attempt)[1]

    def heartbeat_lease(self, inv_id: str, worker_id: str, *, lease: Optional[float] = None, attempt: Optional[int] = None) -> Tuple[Optional[int], bool]:
        """A heartbeat's whole answer: the new lease deadline (epoch ms; None once cancelled), and whether it was cancelled."""
        body: Dict[str, Any] = {"worker_id": worker_id, "attempt": self._attempt(inv_id, worker_id, attempt)}
        if lease is not None:
            body["lease_ms"] = _ms("lease", lease)
        out = self._call("POST", "/invocations/%s/heartbeat%s" % (_seg("id", inv_id), self._qs(inv_id)), body)
        return out["lease_until"], bool(out["cancelled"])

    # ------------------------------------------------------------------ journal

    def journal_append(self, inv_id: str, seq: Optional[int], frame_bytes: bytes, *, final: bool = False,
                       worker_id: Optional[str] = None, attempt: Optional[int] = None) -> int:
        """Appends frame bytes (`[kind, seq, b64 body, meta]`) as the worker that claimed `inv_id`
        here (or `worker_id`, at `attempt`); `seq=None` takes the next."""
        kind, _, body, meta = decode_frame(frame_bytes)
        held = self._claims.get(inv_id)
        if worker_id is None and not held:
            raise error_for("bad_request", "journal_append(%s): no worker_id given and this client did not claim it" % inv_id)
        worker = worker_id if worker_id is not None else held[0]  # type: ignore[index]
        out = self._call("POST", "/invocations/%s/journal%s" % (_seg("id", inv_id), self._qs(inv_id)), {
            "worker_id": worker, "attempt": self._attempt(inv_id, worker, attempt), "seq": seq, "kind": kind, "body": _b64(body),
            "meta": meta, "final": bool(final),
        })
        return int(out["seq"])

    def journal_page(self, inv_id: str, *, since: int = -1, limit: int = 1000) -> Dict[str, Any]:
        """One read of the journal, not waiting: `{"frames": [...], "next", "trimmed_before", "done",
        "state", "outcome"}`; frames as dicts of seq, kind, body (bytes), meta, attempt, final, and
        `outcome` (once the job ended) `{"state", "result": bytes}` or `{"state", "error"}`."""
        out = self._call("GET", "/invocations/%s/journal%s" % (_seg("id", inv_id), self._qs(inv_id, since=str(since), limit=str(limit))))
        for f in out["frames"]:
            f["body"] = _unb64(f["body"]) or b""
        if out.get("outcome") and "result" in out["outcome"]:
            out["outcome"]["result"] = _unb64(out["outcome"]["result"])
        return out

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
            req = urllib.request.Request(self._url("/invocations/%s/journal%s" % (_seg("id", inv_id), self._qs(inv_id))), headers={
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
        return int(self._call("POST", "/invocations/%s/journal/trim%s" % (_seg("id", inv_id), self._qs(inv_id)), {"keep_last": keep_last})["trimmed"])

    def close(self) -> None:
        """Forgets this client's claims and hints and closes its idle connections."""
        self._claims.clear()
        with self._lock:
            self._queues.clear()
        self._pool.close()

    def __enter__(self) -> "HttpDispatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing

    def _attempt(self, inv_id: str, worker_id: str, given: Optional[int] = None) -> Optional[int]:
        """The attempt a holder's call names: the caller's, else the one this client claimed as `worker_id`."""
        return self._claims.attempt_of(inv_id, worker_id, given)

    def _hint(self, inv_id: str, queue: str) -> None:
        with self._lock:
            if len(self._queues) >= 10000:
                self._queues.pop(next(iter(self._queues)))
            self._queues[inv_id] = queue

    def _qs(self, inv_id: str, queue: Optional[str] = None, **extra: str) -> str:
        """The query of a route by id: `extra`, and the job's queue (the caller's, else the one this client knows)."""
        params = dict(extra)
        if queue is None:
            with self._lock:
                queue = self._queues.get(inv_id)
        if queue:
            params["queue"] = queue
        return ("?" + urllib.parse.urlencode(params)) if params else ""


