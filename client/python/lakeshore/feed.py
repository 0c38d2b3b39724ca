"""What the Python local plane (local.py) tells of itself, as the core does (src/core/feed.ts,
workers.ts, metrics.ts): the lifecycle feed, the transition counters, the workers heard from, and
the metrics text. The feed crosses processes as the Node local plane's does
(client/local/feed-log.ts): each process puts its records in the file's `local_feed` table, in
the place each transition took as it committed (feed_log.py), and a reader follows that table, so it sees a Node process's records too.

A record per committed transition: `{"kind": "job", "id", "queue", "status", "attempt",
"worker_id", "error"?, "trace_id"?, "at"}`; worker records `{"kind": "worker", "worker_id",
"queue", "status": started|stopped|lost, "at"}` and log lines `{"kind": "worker", "worker_id",
"queue", "id", "level", "message", "trace_id"?, "at"}`."""
import json
import queue as queues
import re
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Set

from .errors import BadRequest

COUNTERS = ("submitted", "claimed", "succeeded", "failed", "retried", "expired", "cancelled")
COUNTED = {"running": "claimed", "succeeded": "succeeded", "failed": "failed", "retrying": "retried", "expired": "expired", "cancelled": "cancelled"}
LOG_LEVELS = ("debug", "info", "warn", "error")
LOST_MS = 60_000
FORGET_MS = 10 * 60_000
TRACES = 10_000
_TRACEPARENT = re.compile(rb'"traceparent"\s*:\s*"00-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}"')


def _now() -> int:
    return int(time.time() * 1000)


#: An error as a feed record carries it (src/core/feed.ts feedError): whole when its JSON is at most
#: FEED_ERROR_CHARS, else its type and the start of its message, marked truncated.
FEED_ERROR_CHARS = 2048
FEED_MESSAGE_CHARS = 500


def feed_error(e: Dict[str, Any]) -> Dict[str, Any]:
    if len(json.dumps(e, separators=(",", ":"), ensure_ascii=False)) <= FEED_ERROR_CHARS:
        return e
    message = e.get("message")
    message = message if isinstance(message, str) else str(message)
    out: Dict[str, Any] = {"type": e["type"][:200]} if isinstance(e.get("type"), str) else {}
    out["message"] = message[:FEED_MESSAGE_CHARS - 1] + "\u2026" if len(message) > FEED_MESSAGE_CHARS else message
    out["truncated"] = True
    return out

class Feed:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.listeners: List[Any] = []
        self.counts: Dict[str, Dict[str, int]] = {}
        self.since = _now()
        self.traces: Dict[str, str] = {}
        #: Where every record also goes (the file's local_feed) while `wanted()` says some process
        #: reads the feed, or None.
        self.sink: Optional[Any] = None
        self.wanted: Any = lambda: False

    def told(self, queue: str, items: List[Dict[str, Any]]) -> None:
        """Transitions that committed: counted always, told as records to the listeners (made only when there are some)."""
        with self.lock:
            c = self.counts.setdefault(queue, dict.fromkeys(COUNTERS, 0))
            for it in items:
                counter = "submitted" if it.get("submitted") else COUNTED.get(it["status"])
                if counter:
                    c[counter] += 1
            if not self.listeners and not (self.sink is not None and self.wanted()):
                return
            at = _now()
            records = []
            for it in items:
                rec: Dict[str, Any] = {"kind": "job", "id": it["id"], "queue": queue, "status": it["status"], "attempt": it.get("attempt"),
                                       "worker_id": it.get("worker_id")}
                if it.get("error"):
                    rec["error"] = feed_error(it["error"])
                trace = self._trace(it["id"], it["status"], it.get("envelope"))
                if trace:
                    rec["trace_id"] = trace
                rec["at"] = at
                records.append(rec)
        self.tell(records)

    def _trace(self, inv_id: str, status: str, envelope: Optional[bytes]) -> Optional[str]:
        m = _TRACEPARENT.search(envelope) if envelope else None
        t = m.group(1).decode("ascii") if m else None
        if t:
            self.traces.pop(inv_id, None)
            self.traces[inv_id] = t
            if len(self.traces) > TRACES:
                self.traces.pop(next(iter(self.traces)))
        else:
            t = self.traces.get(inv_id)
        if status in ("succeeded", "failed", "cancelled", "expired"):
            self.traces.pop(inv_id, None)
        return t

    def tell(self, records: List[Dict[str, Any]]) -> None:
        if self.sink is not None and records and self.wanted():
            try:
                self.sink(records)
            except Exception:
                pass  # the feed is never load-bearing
        with self.lock:
            listeners = list(self.listeners)
        for (q, kinds, box) in listeners:
            for r in records:
                if (q is None or r["queue"] == q) and r["kind"] in kinds:
                    box.put(r)

    def follow(self, queue: Optional[str], kinds: Optional[List[str]], stop: Optional[threading.Event]) -> Iterator[Dict[str, Any]]:
        wanted: Set[str] = set(kinds or ("job", "worker"))
        if not wanted or wanted - {"job", "worker"}:
            raise BadRequest("unknown kind in %r: the feed has job and worker records (kinds=job,worker)" % (kinds,))
        box: "queues.Queue[Dict[str, Any]]" = queues.Queue()
        entry = (queue, wanted, box)
        with self.lock:
            self.listeners.append(entry)
        try:
            while not (stop and stop.is_set()):
                try:
                    yield box.get(timeout=0.1)
                except queues.Empty:
                    continue
        finally:
            with self.lock:
                self.listeners.remove(entry)

    def log(self, queue: str, worker_id: str, lines: List[Dict[str, Any]]) -> None:
        """A worker's job log lines (the core's logLines checks), to the listeners."""
        if not isinstance(lines, list):
            raise BadRequest("lines must be an array of {id, level, message, trace_id?, at?}")
        if len(lines) > 100:
            raise BadRequest("at most 100 log lines per call (got %d)" % len(lines))
        out = []
        for i, l in enumerate(lines):
            at = "lines[%d]" % i
            if not isinstance(l, dict):
                raise BadRequest("%s must be an object" % at)
            if l.get("level") not in LOG_LEVELS:
                raise BadRequest("%s.level must be one of %s" % (at, ", ".join(LOG_LEVELS)))
            if not isinstance(l.get("message"), str):
                raise BadRequest("%s.message must be a string" % at)
            tid = l.get("trace_id")
            if tid is not None and not (isinstance(tid, str) and re.fullmatch(r"[0-9a-f]{32}", tid)):
                raise BadRequest("%s.trace_id must be 32 lowercase hex digits" % at)
            if not isinstance(l.get("id"), str) or not l["id"]:
                raise BadRequest("%s.id must be a non-empty string" % at)
            msg = l["message"] if len(l["message"]) <= 4096 else l["message"][:4095] + "…"
            rec = {"kind": "worker", "worker_id": worker_id, "queue": queue, "id": l["id"], "level": l["level"], "message": msg}
            if tid:
                rec["trace_id"] = tid
            rec["at"] = l.get("at") or _now()
            out.append(rec)
        if self.listeners or (self.sink is not None and self.wanted()):
            self.tell(out)


class WorkerBook:
    """The workers this process heard from on one queue (the core's WorkerBook)."""

    def __init__(self, feed: Feed, queue: str):
        self.feed, self.queue = feed, queue
        self.seen: Dict[str, Dict[str, Any]] = {}

    def heard(self, worker_id: str, info: Optional[Dict[str, Any]] = None) -> None:
        now = _now()
        w = self.seen.get(worker_id)
        if w:
            w["last_seen"] = now
            if info:
                w["info"] = _clean(info)
            if w["status"] != "active":
                w["status"] = "active"
                self._tell(worker_id, "started")
            return
        self.seen[worker_id] = {"worker_id": worker_id, "info": _clean(info or {}), "first_seen": now, "last_seen": now, "status": "active"}
        self._tell(worker_id, "started")

    def stopped(self, worker_id: str) -> None:
        w = self.seen.get(worker_id)
        if w and w["status"] != "stopped":
            w["status"], w["last_seen"] = "stopped", _now()
            self._tell(worker_id, "stopped")

    def list(self) -> List[Dict[str, Any]]:
        now = _now()
        for wid, w in list(self.seen.items()):
            if w["status"] == "active" and now - w["last_seen"] > LOST_MS:
                w["status"] = "lost"
                self._tell(wid, "lost")
            elif w["status"] != "active" and now - w["last_seen"] > FORGET_MS:
                del self.seen[wid]
        return [dict(w, info=dict(w["info"])) for w in self.seen.values()]

    def _tell(self, worker_id: str, status: str) -> None:
        self.feed.tell([{"kind": "worker", "worker_id": worker_id, "queue": self.queue, "status": status, "at": _now()}])


def _clean(i: Dict[str, Any]) -> Dict[str, Any]:
    text = lambda v, n: v[:n] if isinstance(v, str) else None  # noqa: E731
    num = lambda v: v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2 ** 31 else None  # noqa: E731
    qs = i.get("queues")
    return {"queues": [q[:128] for q in qs if isinstance(q, str)][:32] if isinstance(qs, list) else None,
            "host": text(i.get("host"), 200), "pid": num(i.get("pid")), "version": text(i.get("version"), 64), "concurrency": num(i.get("concurrency"))}


def merge_workers(seen: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Each worker once across the queues that heard from it (the core's mergeWorkers)."""
    by: Dict[str, Dict[str, Any]] = {}
    for s in seen:
        for w in s["workers"]:
            cur = by.get(w["worker_id"])
            if cur is None:
                by[w["worker_id"]] = {"w": w, "queues": {s["queue"]}, "holding": []}
                continue
            cur["queues"].add(s["queue"])
            newer, older = (w, cur["w"]) if w["last_seen"] > cur["w"]["last_seen"] else (cur["w"], w)
            info = dict(older["info"])
            info.update({k: v for k, v in newer["info"].items() if v is not None})
            cur["w"] = dict(newer, info=info, first_seen=min(w["first_seen"], cur["w"]["first_seen"]))
        for r in s["running"]:
            if r["worker_id"] in by:
                by[r["worker_id"]]["holding"].append({"id": r["id"], "queue": s["queue"]})
    out = sorted(by.values(), key=lambda x: -x["w"]["last_seen"])
    return [{"worker_id": x["w"]["worker_id"], "status": x["w"]["status"], "queues": sorted(x["queues"]), "host": x["w"]["info"].get("host"),
             "pid": x["w"]["info"].get("pid"), "version": x["w"]["info"].get("version"), "concurrency": x["w"]["info"].get("concurrency"),
             "first_seen": x["w"]["first_seen"], "last_seen": x["w"]["last_seen"], "holding": x["holding"]} for x in out]


def metrics_text(ns: str, overview: List[Dict[str, Any]], feed: Feed, storage: Optional[Dict[str, Any]] = None, next_after: Optional[str] = None) -> str:
    """The Prometheus text format 0.0.4 (the core's metricsText): gauges from the rows, this process's counters."""
    lines: List[str] = []
    esc = lambda v: str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")  # noqa: E731

    def family(name: str, kind: str, help_: str, rows: List[Any]) -> None:
        lines.extend(["# HELP %s %s" % (name, help_), "# TYPE %s %s" % (name, kind)])
        for labels, value in rows:
            label = ",".join('%s="%s"' % (k, esc(v)) for k, v in [("namespace", ns)] + list(labels.items()))
            lines.append("%s{%s} %s" % (name, label, value))

    family("lakeshore_jobs", "gauge", "Jobs waiting (delayed, queued), running, or failed and kept, counted from the rows.",
           [({"queue": q["queue"], "state": s}, q["counts"][s]) for q in overview for s in ("delayed", "queued", "running", "failed")])
    family("lakeshore_oldest_queued_seconds", "gauge", "How long the longest-waiting queued job has waited (0: none waits).",
           [({"queue": q["queue"]}, (q["oldest_queued_ms"] or 0) / 1000) for q in overview])
    family("lakeshore_paused", "gauge", "1 while the queue is paused.", [({"queue": q["queue"]}, 1 if q["paused"] else 0) for q in overview])
    with feed.lock:
        counts = {q["queue"]: dict(feed.counts[q["queue"]]) for q in overview if q["queue"] in feed.counts}
    family("lakeshore_transitions_total", "counter", "Transitions since the counters started (they reset when the queue object or process restarts).",
           [({"queue": q, "transition": c}, n[c]) for q, n in counts.items() for c in COUNTERS])
    family("lakeshore_counters_started_seconds", "gauge", "When the transition counters of the queue started, in Unix seconds.",
           [({"queue": q}, feed.since // 1000) for q in counts])
    pushing = [(q["queue"], q["pushing"]) for q in overview if q.get("pushing")]
    family("lakeshore_push_in_flight", "gauge", "Deliveries a push queue's pusher has on their way to its target.",
           [({"queue": q}, p["in_flight"]) for q, p in pushing])
    family("lakeshore_push_deliveries_total", "counter",
           "A push queue's deliveries by outcome (acked, accepted, nacked, refused) since its pusher started.",
           [({"queue": q, "outcome": o}, p["delivered"][o]) for q, p in pushing for o in ("acked", "accepted", "nacked", "refused")])
    family("lakeshore_push_latency_seconds", "gauge",
           "How long a push queue's target took to answer, over its last 256 answers (quantile 0.5 and 0.99).",
           [({"queue": q, "quantile": k}, p["latency_ms"][m] / 1000) for q, p in pushing if p["latency_ms"] for k, m in (("0.5", "p50"), ("0.99", "p99"))])
    if storage is not None:
        shard = {"shard": storage["shard"]}
        family("lakeshore_storage_bytes", "gauge", "Bytes the namespace's database (its shard) holds, as it last reported them.", [(shard, storage["bytes"] or 0)])
        family("lakeshore_storage_limit_bytes", "gauge", "The database's storage limit: past STORAGE_HIGH_WATER_PERCENT of it, submits are refused (storage_full).",
               [(shard, storage["limit_bytes"])])
        family("lakeshore_storage_high_water_bytes", "gauge", "Past this many bytes, submits are refused (storage_full).", [(shard, storage["high_water_bytes"])])
    family("lakeshore_more_queues", "gauge", "1 when more queues follow this page: ask again with ?after= its after label; 0 on the last page.",
           [({}, 0)] if next_after is None else [({"after": next_after}, 1)])
    return "\n".join(lines) + "\n"


class ObserveVerbs:
    """Mixed into Dispatch: the feed, the workers and the metrics of this process's plane."""

    def events(self, queue: Optional[str] = None, *, kinds: Optional[List[str]] = None, stop: Optional[threading.Event] = None) -> Iterator[Dict[str, Any]]:
        """The lifecycle feed of `queue` (None: every queue), live, of every process on this file, until `stop` is set."""
        from .checks import _name
        return self._feed_follow(None if queue is None else _name("queue", queue), kinds, stop)  # type: ignore[attr-defined]

    def worker_log(self, queue: str, worker_id: str, lines: List[Dict[str, Any]]) -> None:
        """Log lines of this worker's jobs, for this process's feed readers (run_worker sends current_job().log's)."""
        from .checks import _name, _segment
        self.feed.log(_name("queue", queue), _segment("worker_id", worker_id), lines)  # type: ignore[attr-defined]

    def book(self, queue: str) -> WorkerBook:
        books = self.__dict__.setdefault("_books", {})
        if queue not in books:
            books[queue] = WorkerBook(self.feed, queue)  # type: ignore[attr-defined]
        return books[queue]

    def touch(self, worker_id: str) -> None:
        """An ack, nack or heartbeat of `worker_id`: heard wherever it is known."""
        for b in self.__dict__.get("_books", {}).values():
            if worker_id in b.seen:
                b.heard(worker_id)

    def worker_stopped(self, queue: str, worker_id: str) -> None:
        from .checks import _name, _segment
        self.book(_name("queue", queue)).stopped(_segment("worker_id", worker_id))

    def workers(self) -> List[Dict[str, Any]]:
        """The workers this process heard from lately, each once, with what each holds."""
        seen = [{"queue": q, "workers": b.list(), "running": self.list(q, state="running", limit=1000)["items"]}  # type: ignore[attr-defined]
                for q, b in self.__dict__.get("_books", {}).items()]
        return merge_workers(seen)

    def metrics(self) -> str:
        return metrics_text(self.namespace, self.overview(), self.feed, self.storage())  # type: ignore[attr-defined]
