"""Dispatch: the local plane in Python, on a SQLite file (or ":memory:"), with the standard
library's sqlite3.

It runs the TypeScript core's own SQL: the migrations and, for each verb, the statements its plans
build (each transition one guarded statement), loaded from sql.json, which
`scripts/python-sql.ts` writes from src/core and a test keeps current. What is Python here is the
order of a verb's statements and the reading of their answers (which diagnosis a miss gets). So a
Python process and a Node process on one file share one queue: the same rows, the same guards, the
same transactions. Blocking calls (claim with `wait`, `result`, `journal_read`) look again every
`poll` seconds: another process's commit is seen at the next look.

>>> d = Dispatch("./jobs.sqlite")
>>> d.submit("cpu", encode_envelope("add", [1, 2]), id="job-1")
"""
import datetime
import json
import os
import sqlite3
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .checks import STATES, not_found, unknown_state, _duration, _ended, _ids, _result_wait, _int, _moment, _name, _number, _segment, _shallow, _text, max_wait, _ms
from .errors import BadRequest, FencingConflict, InvocationCancelled, InvocationFailed, LakeshoreError, PayloadTooLarge, StorageFull, Timeout
from .http import Claimed
from .claims import ClaimMachinery
from .feed import Feed, ObserveVerbs
from .feed_log import FeedLog
from .journal import JournalVerbs
from .operators import OperatorVerbs
from .schedules import ScheduleVerbs
from .clock import QueueClock
from .envelope import stored, unstored
from .views import Recent, ViewVerbs
from .held import HeldClaims

with open(os.path.join(os.path.dirname(__file__), "sql.json"), encoding="utf-8") as _f:
    SQL = json.load(_f)

LIMITS = SQL["limits"]


#: Most result and error bytes one answer of `results` carries past its first job (src/core/sql/read.ts).
RESULTS_BYTES = 8 << 20
#: Values of at most this many bytes come with the first read of an answer.
INLINE_BYTES = 8 << 10

class _Rows(list):  # type: ignore[type-arg]
    """A statement's rows, and how many rows it changed."""

    def __init__(self, rows: Sequence[sqlite3.Row], changes: int):
        super().__init__(rows)
        self.changes = changes


class Dispatch(ClaimMachinery, FeedLog, JournalVerbs, ObserveVerbs, OperatorVerbs, ScheduleVerbs, ViewVerbs):
    """The local plane: the contract's verbs on a SQLite file shared by Python and Node processes."""

    in_process = True

    def __init__(self, path: str = ":memory:", *, ns: str = "default", namespace: Optional[str] = None, busy_timeout: float = 10.0,
                 storage_limit_bytes: int = 10_000_000_000, storage_high_water_percent: int = 90):
        if sqlite3.sqlite_version_info < (3, 38, 0):
            raise RuntimeError("the local plane needs SQLite >= 3.38 (its JSON operators); this Python has SQLite %s" % sqlite3.sqlite_version)
        self.path = path
        self.namespace = _name("namespace", namespace or ns, 64)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=busy_timeout)
        self._db.row_factory = sqlite3.Row
        if path != ":memory:":
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
        self._migrate()
        self._claims = HeldClaims()  # the claims made here (held.py)
        self._limits = LIMITS
        self._sql = SQL
        self.recent = Recent()
        self.feed = Feed()
        # The feed crosses processes: this process's records go to the file, readers follow the file.
        self.feed.sink = self._feed_write
        self.feed.wanted = self._feed_wanted
        self._feed_writes = 0
        self._feed_slot = threading.local()  # each thread's last verb's slot in local_feed (feed_log.py)
        self._feed_readers = 0  # this process's readers
        self._feed_read_at = float("-inf")
        self._feed_read = False
        self.clock = QueueClock(self)
        self._closed = False
        # The file's storage budget (src/core/storage.ts): past the high-water mark submits are refused.
        self._storage_limit = _int("storage_limit_bytes", storage_limit_bytes, 1, 2 ** 62)
        self._high_water = self._storage_limit * min(100, max(1, _int("storage_high_water_percent", storage_high_water_percent, 1, 100))) // 100
        self._bytes: Optional[int] = None
        self._bytes_at = float("-inf")

    # ------------------------------------------------------------------ plumbing

    def _migrate(self) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("CREATE TABLE IF NOT EXISTS d1_migrations (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE, "
                                 "applied_at TEXT DEFAULT CURRENT_TIMESTAMP NOT NULL)")
                done = {r[0] for r in self._db.execute("SELECT name FROM d1_migrations")}
                for m in SQL["migrations"]:
                    if m["name"] in done:
                        continue
                    for part in m["sql"].split("--> statement-breakpoint"):
                        if part.strip():
                            self._db.execute(part)
                    self._db.execute("INSERT INTO d1_migrations (name) VALUES (?)", (m["name"],))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def _run(self, verb: str, values: Dict[str, Any]) -> List["_Rows"]:
        """The verb's statements in one write transaction: each statement's rows (and `changes`)."""
        with self._lock:
            if self._closed:
                raise LakeshoreError("unavailable", "this Dispatch is closed")
            self._db.execute("BEGIN IMMEDIATE")
            try:
                out = []
                changed = False
                # One moment for all of a verb's statements, as a plan has one `now`.
                values = {**values, "now": values.get("now") or int(time.time() * 1000)}
                for st in SQL["verbs"][verb]:
                    cur = self._db.execute(st["sql"], [self._value(p, values) for p in st["params"]])
                    out.append(_Rows(cur.fetchall(), cur.rowcount))
                    changed = changed or (cur.rowcount > 0 and not st["sql"].lstrip().upper().startswith("SELECT"))
                slot = self._feed_seal(verb, changed)
                self._db.execute("COMMIT")
                self._feed_sealed(slot)
                self._observe_size()
                return out
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def _value(self, param: str, values: Dict[str, Any]) -> Any:
        if param == "null":
            return None
        if param == "=max_safe_integer":
            return 2 ** 53 - 1
        if param.startswith("="):
            return int(param[1:])
        if param == "ns":
            return self.namespace
        if param in LIMITS and param not in values:  # a verb may put its own in (a nack: the worker's budget)
            return LIMITS[param]
        return values[param]

    def _holder(self, inv_id: str, worker_id: str, attempt: Optional[int] = None) -> Dict[str, Any]:
        """Who holds the job: the worker, and its attempt (given, else the one it claimed here, else any)."""
        attempt = self._claims.attempt_of(_segment("id", inv_id), worker_id, attempt)
        return {"worker_id": _segment("worker_id", worker_id), "attempt": attempt}

    @staticmethod
    def _stale(verb: str, inv_id: str, row: sqlite3.Row, h: Dict[str, Any]) -> LakeshoreError:
        """Why a holder's verb missed (src/core/sql/fence.ts staleError)."""
        at = "invocation %s" % json.dumps(inv_id)
        if row["state"] != "running":
            return FencingConflict("%s refused: %s is %s, not running" % (verb, at, row["state"]))
        if not Dispatch._same(row, h):
            other = "" if row["worker_id"] == h["worker_id"] else " of another worker"
            return FencingConflict("%s refused: %s is held by attempt %d%s; this worker's lease was lost" % (verb, at, row["attempt"], other))
        if row["lease_until"] is not None:
            ran_out = datetime.datetime.fromtimestamp(row["lease_until"] / 1000, datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            return FencingConflict("%s refused: the lease of attempt %d of %s ran out at %s; this worker's lease was lost" % (verb, row["attempt"], at, ran_out))
        return FencingConflict("%s refused for %s" % (verb, at))

    @staticmethod
    def _same(row: sqlite3.Row, h: Dict[str, Any]) -> bool:
        return row["worker_id"] == h["worker_id"] and (h["attempt"] is None or row["attempt"] == h["attempt"])

    @staticmethod
    def _holds(row: sqlite3.Row, h: Dict[str, Any]) -> bool:
        """The fencing guard read back from a row (fence.ts holds): running, this holder's, its lease not run out."""
        return (row["state"] == "running" and Dispatch._same(row, h) and row["lease_until"] is not None
                and row["lease_until"] > int(time.time() * 1000))

    def _found(self, verb: str, inv_id: str, queue: Optional[str] = None) -> sqlite3.Row:
        rows = self._run(verb, {"id": inv_id, "queue": queue})[0]
        if not rows:
            raise not_found(inv_id)
        return rows[0]

    def _observe_size(self) -> None:
        """The file's size after a batch, as D1 reports `size_after`: pages (free ones too) times page size."""
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        self._bytes = int(pages) * int(self._db.execute("PRAGMA page_size").fetchone()[0])
        self._bytes_at = time.time()

    def storage(self) -> Dict[str, Any]:
        """The file against its storage budget: `{"shard": "local", "bytes", "limit_bytes",
        "high_water_bytes", "full"}`; past the high-water mark submits raise StorageFull."""
        if time.time() - self._bytes_at >= 10.0:  # the core's STORAGE_FRESH_MS
            with self._lock:
                self._observe_size()
        full = self._bytes is not None and self._bytes >= self._high_water
        return {"shard": "local", "bytes": self._bytes, "limit_bytes": self._storage_limit, "high_water_bytes": self._high_water, "full": full}

    def _admit_work(self) -> None:
        """Refuses new work while the file is past its high-water mark (src/core/storage.ts storageFull)."""
        s = self.storage()
        if s["full"]:
            raise StorageFull("the database is past its high-water mark (%d of %d bytes; new work is refused past %d): submits wait until "
                              "retention, a move or a new shard makes room; claims, acks and reads go on" % (s["bytes"], s["limit_bytes"], s["high_water_bytes"]))

    # ------------------------------------------------------------------ producers

    def submit(self, queue: str, envelope: bytes, *, id: str, key: Optional[str] = None, priority: float = 0.0, parent: Optional[str] = None,
               delay: Optional[float] = None, run_at: Optional[float] = None, ttl: Optional[float] = None,
               expires_at: Optional[float] = None, max_attempts: Optional[int] = None) -> str:
        """Submits one job; idempotent on `key` (per queue) and on `id`. Times as HttpDispatch.submit."""
        queue, inv_id = _name("queue", queue), _segment("id", id)
        self._admit_work()
        if len(envelope) > LIMITS["envelope_bytes"]:
            raise PayloadTooLarge("envelope is %d bytes; the limit is %d" % (len(envelope), LIMITS["envelope_bytes"]))
        now = int(time.time() * 1000)
        if delay is not None and run_at is not None:
            raise BadRequest("give delay or run_at, not both")
        if ttl is not None and expires_at is not None:
            raise BadRequest("give ttl or expires_at, not both")
        # The core's submitInput, in ms: durations up to a year ahead, moments no further.
        wait = _duration("delay", _ms(_number("delay", delay))) if delay is not None else None
        due = now + wait if wait is not None else _moment("run_at", run_at, now)
        life = _duration("ttl", _ms(_number("ttl", ttl)), 1) if ttl is not None else None
        values = {"queue": queue, "id": inv_id, "key": None if key is None else _text("key", key), "priority": _number("priority", priority),
                  "parent": None if parent is None else _text("parent", parent), "envelope": stored(envelope),
                  "run_at": due if due is not None and due > now else None,
                  "expires_at": now + life if life is not None else _moment("expires_at", expires_at, now),
                  "max_attempts": None if max_attempts is None else _int("max_attempts", max_attempts, 1, 1000), "now": now}
        made = self._run("submit", values)[0]
        if made:
            self.feed.told(queue, [{"id": inv_id, "status": made[0]["state"], "attempt": 0, "submitted": True, "envelope": bytes(envelope)}])
            return inv_id
        by_key, by_id = self._run("submit_existing", values)
        if by_key:
            return str(by_key[0]["id"])
        if by_id and by_id[0]["queue"] == queue:
            return inv_id
        if by_id:
            raise FencingConflict("id %s already names an invocation in another queue" % json.dumps(inv_id))
        raise FencingConflict("submit of %s conflicted with a concurrent change; retry it" % json.dumps(inv_id))

    def submit_many(self, queue: str, items: List[Dict[str, Any]]) -> List[Union[str, LakeshoreError]]:
        """Submits many: `items` are dicts of submit's arguments (`envelope`, `id`, ...); each keeps
        its own id, key and idempotency and fails alone (its error in its place, not raised). Past the
        storage high-water mark the batch is refused whole: every item answers StorageFull."""
        try:
            self._admit_work()
        except StorageFull as e:
            return [e for _ in items]
        out: List[Union[str, LakeshoreError]] = []
        for it in items:
            it = dict(it)
            try:
                out.append(self.submit(queue, it.pop("envelope"), **it))
            except LakeshoreError as e:
                out.append(e)
        return out

    def cancel(self, inv_id: str) -> bool:
        done = self._run("cancel", {"id": _segment("id", inv_id), "queue": None})[0]
        if done:
            self.clock.soon(done[0]["queue"])
            self.feed.told(done[0]["queue"], [{"id": inv_id, "status": "cancelled"}])
            return True
        self._found("cancel_missed", inv_id)
        return False

    def get(self, inv_id: str) -> Optional[Dict[str, Any]]:
        rows = self._run("get", {"id": _segment("id", inv_id), "queue": None})[0]
        if not rows:
            return None
        r = dict(rows[0])
        out = {k: r.get(k) for k in ("id", "queue", "key", "priority", "parent", "state", "attempt", "worker_id", "lease_until",
                                      "created_at", "updated_at", "started_at", "finished_at", "run_at", "expires_at", "max_attempts")}
        out["namespace"] = r["ns"]
        out["envelope"] = unstored(r["envelope"])
        out["result"] = None if r["result"] is None else bytes(r["result"])
        out["error"] = None if r["error"] is None else json.loads(r["error"])
        return out

    def result(self, inv_id: str, *, timeout: Optional[float] = 30.0, poll: float = 0.02) -> bytes:
        """The result of a succeeded invocation, waiting up to `timeout` seconds for it to end (as long
        as asked: the HTTP route's 300 s cap on one wait is the client's to slice, as here; None: as
        long as the job takes)."""
        _segment("id", inv_id)
        deadline = float("inf") if timeout is None else time.monotonic() + _number("timeout", timeout, 0)
        while True:
            row = self.get(inv_id)
            if row is None:
                raise not_found(inv_id)
            if row["state"] == "succeeded":
                return row["result"] or b""
            if row["state"] == "failed":
                raise InvocationFailed(inv_id, row["error"] or {"message": "failed"})
            if row["state"] == "cancelled":
                raise InvocationCancelled(inv_id)
            if time.monotonic() >= deadline:
                raise Timeout("invocation %s is still %s after %ss" % (inv_id, row["state"], timeout))
            time.sleep(poll)

    def results(self, queue: str, ids: Sequence[str], *, timeout: Optional[float] = 30.0, poll: float = 0.02) -> List[Dict[str, Any]]:
        """Waits on many jobs of `queue` at once (at most 1,000 ids): as soon as any has ended, each
        that has, as `{"id", "result": bytes}` or `{"id", "error": InvocationFailed,
        InvocationCancelled or NotFound (the queue has no such job)}`; [] once `timeout` seconds
        (at most 300) passed with none ended."""
        q, wanted = _name("queue", queue), _ids(ids)
        deadline = time.monotonic() + _result_wait(timeout)
        while True:
            rows = self._ended_within(q, wanted)
            if rows or time.monotonic() >= deadline:
                return [_ended(r, q) for r in rows]
            time.sleep(poll)

    def _ended_within(self, q: str, wanted: List[str]) -> List[Dict[str, Any]]:
        """The ended jobs of `wanted` within RESULTS_BYTES of results and errors (at least one), as
        src/core/sql/read.ts endedPlan answers: values of at most INLINE_BYTES come with the first
        read; larger ones that fit are read after, by rowid; the rest are left for the next ask."""
        out = [dict(r) for r in self._run("ended", {"queue": q, "ids": json.dumps(wanted)})[0]]
        large = [i for i, r in enumerate(out) if r["state"] is not None and r["n"] > INLINE_BYTES]
        if not large:
            return out
        used = sum(r["n"] or 0 for i, r in enumerate(out) if i not in set(large))
        take: List[int] = []
        for at in large:
            if used + out[at]["n"] > RESULTS_BYTES and (used > 0 or take):
                break
            take.append(at)
            used += out[at]["n"]
        left = set(large[len(take):])
        if take:
            got = {r["rid"]: r for r in self._run("ended_values", {"ids": json.dumps([out[at]["rid"] for at in take])})[0]}
            for at in take:
                x = got.get(out[at]["rid"])
                if x is None:  # retried between the two reads: no longer ended
                    left.add(at)
                else:
                    out[at].update(state=x["state"], result=x["result"], error=x["error"])
        return [r for i, r in enumerate(out) if i not in left]

    def results_page(self, queue: str, ids: Sequence[str], *, timeout: Optional[float] = 30.0,
                     after: Optional[str] = None) -> Tuple[List[Dict[str, Any]], Optional[str]]:
        """`results`, and no cursor: other processes change this file's rows, so each look reads them all."""
        if after is not None:
            _text("after", after, 100)
        return self.results(queue, ids, timeout=timeout), None

    def count(self, queue: str, state: str = "queued") -> int:
        if state not in STATES:
            raise unknown_state(state)
        return int(self._run("count", {"queue": _name("queue", queue), "state": state})[0][0]["n"])

    # ------------------------------------------------------------------ workers

    def claim(self, queue: str, worker_id: str, *, kind: str = "fifo", temperature: float = 1.0, wait: float = 0.0, lease: Optional[float] = None,
              poll: float = 0.02, claim_id: Optional[str] = None, worker: Optional[Dict[str, Any]] = None) -> Optional[Claimed]:
        """Claims the next job (fifo, or its alias priority: highest priority first, then oldest;
        filo: newest first; boltzmann: a priority level drawn at `temperature`), waiting up to
        `wait` seconds for one. `claim_id` is accepted for the HTTP plane's signature: a local
        claim looks again every `poll` seconds, and its caller stops it by giving it a short wait."""
        got = self.claim_many(queue, worker_id, 1, kind=kind, temperature=temperature, wait=wait, lease=lease, poll=poll, worker=worker)
        return got[0] if got else None

    def claim_many(self, queue: str, worker_id: str, max: int, *, kind: str = "fifo", temperature: float = 1.0, wait: float = 0.0,
                   lease: Optional[float] = None, poll: float = 0.02, claim_id: Optional[str] = None,
                   worker: Optional[Dict[str, Any]] = None) -> List[Claimed]:
        """Claims up to `max` jobs with the core's guarded statements, in claim order; waits up to
        `wait` seconds while there is none."""
        if kind == "priority" or (kind == "boltzmann" and _number("temperature", temperature, 0) == 0):
            kind = "fifo"  # boltzmann at T = 0 is the top level, oldest first
        if kind not in ("fifo", "filo", "boltzmann"):
            raise BadRequest("unknown claim kind %s: expected fifo (or its alias priority), filo or boltzmann" % json.dumps(kind, ensure_ascii=False))
        _int("max", max, 1, 1000)
        values = {"queue": _name("queue", queue), "worker_id": _segment("worker_id", worker_id), "limit": max,
                  "lease_ms": None if lease is None else _ms(_number("lease", lease, 0.001))}
        self.clock.watch(values["queue"])  # its schedules fire while this process works the queue
        deadline = time.monotonic() + max_wait(wait)
        while True:
            rows = self._draw(values, temperature, max) if kind == "boltzmann" else self._take(values, kind, max)
            if rows:
                return self._hand(rows, worker_id, values["queue"], worker)
            if time.monotonic() >= deadline:
                return []
            time.sleep(poll)

    def release(self, queue: str, worker_id: str, items: List[Dict[str, Any]]) -> List[str]:
        """Gives back jobs of `queue` this worker claimed and never started (it is stopping, say):
        each still its own at that attempt (`{"id", "attempt"?}`; default the one this Dispatch
        claimed) goes back to the queue, its attempt not charged, unlike a nack's. Answers the ids
        put back; the others are no longer the worker's and stay as they are."""
        _name("queue", queue)
        if len(items) > 1000:
            raise BadRequest("a batch holds at most 1000 items; this one holds %d" % len(items))
        handed = []
        for it in items:
            h = self._holder(it["id"], worker_id, it.get("attempt"))
            attempt = None if h["attempt"] is None else _int("attempt", h["attempt"], 0, 2 ** 53)
            handed.append((_segment("id", it["id"]), attempt))
        if not handed:
            return []
        back = [str(r["id"]) for r in self._run("release", {"queue": queue, "worker_id": _segment("worker_id", worker_id),
                                                             "handed_json": json.dumps([list(h) for h in handed])})[0]]
        self.touch(worker_id)
        for i, attempt in handed:
            if i in back:
                self._claims.done(i, worker_id, attempt)
        if back:
            self.feed.told(queue, [{"id": i, "status": "queued"} for i in back])
        return back

    def ack(self, inv_id: str, worker_id: str, *, result: Optional[bytes] = None, attempt: Optional[int] = None, queue: Optional[str] = None) -> None:
        """Finishes the job with its result, as the worker holding it (`queue`, when given, narrows the guard)."""
        if result is not None and len(result) > LIMITS["result_bytes"]:
            raise PayloadTooLarge("result is %d bytes; the limit is %d" % (len(result), LIMITS["result_bytes"]))
        h = self._holder(inv_id, worker_id, attempt)
        done = self._run("ack", {"id": inv_id, "queue": queue, "result": result, **h})[0]
        self.touch(h["worker_id"])
        if done:
            self._claims.done(inv_id, h["worker_id"], h["attempt"])
            self.recent.count(done[0]["queue"], "succeeded")
            self.clock.soon(done[0]["queue"])
            self.feed.told(done[0]["queue"], [{"id": inv_id, "status": "succeeded", "attempt": done[0]["attempt"], "worker_id": h["worker_id"]}])
            return
        row = self._found("ack_missed", inv_id, queue)
        if not (row["state"] == "succeeded" and self._same(row, h)):
            raise self._stale("ack", inv_id, row, h)

    def ack_and_claim(self, queue: str, worker_id: str, acks: List[Dict[str, Any]], max: int, *, kind: str = "fifo", wait: float = 0.0,
                      lease: Optional[float] = None) -> Tuple[List[Optional[LakeshoreError]], List[Claimed]]:
        """A worker's acks (`{"id", "attempt"?, "result"?}`, each fenced alone, on this queue) and
        its next claim: the acks land first; with acks aboard the claim waits at most 25 ms. Bad
        claim arguments refuse the whole call before any ack lands."""
        _name("queue", queue)
        _int("max", max, 1, 1000)
        if lease is not None:
            _number("lease", lease, 0.001)
        max_wait(wait)
        answers: List[Optional[LakeshoreError]] = []
        for a in acks:
            try:
                self.ack(a["id"], worker_id, result=a.get("result"), attempt=a.get("attempt"), queue=queue)
                answers.append(None)
            except LakeshoreError as e:
                answers.append(e)
        return answers, self.claim_many(queue, worker_id, max, kind=kind, wait=min(wait, 0.025) if acks else wait, lease=lease)

    def nack(self, inv_id: str, worker_id: str, *, error: Union[str, Dict[str, Any]], retry: bool = True, delay: Optional[float] = None,
             attempt: Optional[int] = None, max_attempts: Optional[int] = None) -> str:
        """Gives a job back: "queued" or "delayed" (retried within its attempt budget) or "failed".
        `max_attempts`: the worker's budget, used only when neither the job nor its queue sets one."""
        err = {"message": error} if isinstance(error, str) else _shallow("error", error)
        if not isinstance(err, dict) or not isinstance(err.get("message"), str):
            raise BadRequest("error must be a string or an object with a string message")
        h = self._holder(inv_id, worker_id, attempt)
        values = {"id": inv_id, "queue": None, "error_json": json.dumps(err), "delay_ms": None if delay is None else _ms(_number("delay", delay, 0)), **h,
                  # the push backoff where the queue sets none, for the pusher's worker id alone (a Node pusher may share this file)
                  "default_backoff": LIMITS["push_backoff"] if h["worker_id"] == LIMITS["push_worker_id"] else None}
        if max_attempts is not None:
            values["default_max_attempts"] = _int("max_attempts", max_attempts, 1, 1000)
        rows = self._run("nack_retry" if retry else "nack_fail", values)[0]
        self.touch(h["worker_id"])
        if rows:
            self._claims.done(inv_id, h["worker_id"], h["attempt"])
            state = str(rows[0]["state"])
            self.recent.count(rows[0]["queue"], state)
            if state == "failed":
                self.clock.soon(rows[0]["queue"])
            self.feed.told(rows[0]["queue"], [{"id": inv_id, "status": "failed" if state == "failed" else "retrying", "attempt": h["attempt"],
                                               "worker_id": h["worker_id"], "error": err if state == "failed" else None}])
            return state
        row = self._found("nack_missed", inv_id)
        if (row["state"] == "failed" or (retry and row["state"] in ("queued", "delayed"))) and self._same(row, h):
            return "failed" if row["state"] == "failed" else "queued"
        raise self._stale("nack", inv_id, row, h)

    def heartbeat(self, inv_id: str, worker_id: str, *, lease: Optional[float] = None, attempt: Optional[int] = None) -> bool:
        """Extends the lease; True when the job was cancelled meanwhile (stop working on it)."""
        return self.heartbeat_lease(inv_id, worker_id, lease=lease, attempt=attempt)[1]

    def heartbeat_lease(self, inv_id: str, worker_id: str, *, lease: Optional[float] = None, attempt: Optional[int] = None) -> Tuple[Optional[int], bool]:
        """A heartbeat's whole answer: the new lease deadline (epoch ms; None once cancelled), and whether it was cancelled."""
        h = self._holder(inv_id, worker_id, attempt)
        self.touch(h["worker_id"])
        rows = self._run("heartbeat", {"id": inv_id, "queue": None, "lease_ms": None if lease is None else _ms(_number("lease", lease, 0.001)), **h})[0]
        if rows:
            return int(rows[0]["lease_until"]), False
        row = self._found("heartbeat_missed", inv_id)
        if row["state"] == "cancelled" and self._same(row, h):
            return None, True
        raise self._stale("heartbeat", inv_id, row, h)

    def close(self) -> None:
        self.clock.close()
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()

    def __enter__(self) -> "Dispatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
