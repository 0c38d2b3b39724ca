"""What an operator sees on the Python local plane (local.py): each queue's overview, pages of a
queue's jobs in one state, the queues. The statements are the core's (sql/list.ts, via sql.json);
the cursor is the core's too (base64url JSON of [state, sort key, rid]), so a page's cursor means
the same on every plane. `recent` counts the jobs this process finished, as the Node local plane
counts its own (docs/contract.md, "Views")."""
import base64
import json
import time
from typing import Any, Dict, List, Optional

from .checks import MAX_NAMED_QUEUES, STATES, _ids, _int, _name, unknown_state
from .errors import BadRequest

FINISHED_COUNT_CAP = 10_000
CAPPED_STATES = ("succeeded", "cancelled")
BUCKET_MS = 10_000
BUCKETS = 30
SUMMARY = ("id", "queue", "key", "priority", "parent", "state", "attempt", "worker_id", "lease_until", "created_at", "updated_at",
           "started_at", "finished_at", "run_at", "expires_at", "max_attempts")


def _b64url(s: str) -> str:
    return base64.urlsafe_b64encode(s.encode("utf-8")).decode("ascii").rstrip("=")


def _cursor_of(state: str, cursor: str) -> List[Any]:
    try:
        v = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8"))
        if isinstance(v, list) and len(v) == 3 and v[0] == state and (v[1] is None or isinstance(v[1], (int, float))) and isinstance(v[2], int):
            return v[1:]
    except ValueError:
        pass
    raise BadRequest("cursor is not one this listing of %s jobs gave out" % state)


class Recent:
    """Jobs finished per 10 s over the last 5 minutes, by this process (the core's Feed.recent)."""

    def __init__(self) -> None:
        self.rings: Dict[str, Dict[str, Any]] = {}

    def ring(self, queue: str, now_ms: int) -> Dict[str, Any]:
        slot = now_ms // BUCKET_MS
        r = self.rings.setdefault(queue, {"slot": slot, "succeeded": [0] * BUCKETS, "failed": [0] * BUCKETS})
        shift = min(slot - r["slot"], BUCKETS)
        if shift > 0:
            for k in ("succeeded", "failed"):
                r[k] = r[k][shift:] + [0] * shift
            r["slot"] = slot
        return r

    def count(self, queue: str, state: str, n: int = 1) -> None:
        if n and state in ("succeeded", "failed"):
            self.ring(queue, int(time.time() * 1000))[state][-1] += n

    def of(self, queue: str) -> Dict[str, Any]:
        now = int(time.time() * 1000)
        r = self.ring(queue, now)
        return {"bucket_ms": BUCKET_MS, "until": (now // BUCKET_MS + 1) * BUCKET_MS, "succeeded": list(r["succeeded"]), "failed": list(r["failed"])}


def _summary(r: Any) -> Dict[str, Any]:
    """A row as a listing gives it: no envelope or result, its error decoded."""
    item = {k: r[k] for k in SUMMARY}
    item["namespace"] = r["ns"]
    item["error"] = None if r["error"] is None else json.loads(r["error"])
    return item


class ViewVerbs:
    """Mixed into Dispatch: uses its _run, queue_info and recent."""

    def list_queues(self) -> List[str]:
        """The queues of the namespace that ever held work or settings."""
        return [r["queue"] for r in self._run("queues", {})[0]]  # type: ignore[attr-defined]

    def get_many(self, ids: List[str]) -> List[Optional[Dict[str, Any]]]:
        """Up to 1,000 jobs at once, in the order asked: each one's row without envelope and result
        (as a listing gives it), or None where there is no such job."""
        rows = self._run("get_many", {"ids": json.dumps(_ids(ids, distinct=False))})[0]  # type: ignore[attr-defined]
        return [None if r["id"] is None else _summary(r) for r in rows]

    def list(self, queue: str, *, state: str = "queued", limit: int = 50, cursor: Optional[str] = None) -> Dict[str, Any]:
        """A page of `queue`'s jobs in `state`: `{"items": [row without envelope and result], "cursor"}`
        (None after the last page). Claim order for queued, soonest first for running and delayed,
        newest first for finished states."""
        queue = _name("queue", queue)
        if state not in STATES:
            raise unknown_state(state)
        limit = _int("limit", limit, 1, 1000)
        values: Dict[str, Any] = {"queue": queue, "limit+1": limit + 1}
        if cursor is not None:
            values["after_key"], values["after_rid"] = _cursor_of(state, cursor)
        results = self._run("list_%s%s" % (state, "" if cursor is None else "_after"), values)  # type: ignore[attr-defined]
        rows = [r for res in results for r in res][: limit + 1]
        page = rows[:limit]
        items = [_summary(r) for r in page]
        nxt = None
        if len(rows) > limit and page:
            last = page[-1]
            key = {"queued": last["priority"], "running": last["lease_until"], "delayed": last["run_at"]}.get(state)
            nxt = _b64url(json.dumps([state, key, last["rid"]], separators=(",", ":")))
        return {"items": items, "cursor": nxt}

    def overview(self, queues: Optional[List[str]] = None) -> List[Dict[str, Any]]:
        """Each queue (or those named): `{"queue", "paused", "settings", "counts": {each state},
        "capped", "oldest_queued_ms", "recent", "pushing"}`, as GET /queues answers it. `pushing` (a
        pusher's figures) is None: a Python process runs no pusher (`lakeshore push` does, in Node)."""
        out = []
        now = int(time.time() * 1000)
        for q in ([_name("queue", x) for x in queues] if queues else self.list_queues()):
            stats = dict(self._run("overview", {"queue": q})[0][0])  # type: ignore[attr-defined]
            # Only the capped states' counts stop at the cap (their statements read one more); the others are exact.
            counts = {s: min(int(stats[s] or 0), FINISHED_COUNT_CAP) if s in CAPPED_STATES else int(stats[s] or 0) for s in STATES}
            capped = [s for s in CAPPED_STATES if int(stats[s] or 0) > FINISHED_COUNT_CAP]
            oldest = None if stats["oldest"] is None else max(0, now - int(stats["oldest"]))
            info = self.queue_info(q)  # type: ignore[attr-defined]
            out.append({**info, "counts": counts, "capped": capped, "oldest_queued_ms": oldest, "recent": self.recent.of(q),  # type: ignore[attr-defined]
                        "pushing": None})
        return out

    def overview_page(self, *, after: Optional[str] = None, limit: Optional[int] = None) -> Dict[str, Any]:
        """One page of the namespace's queues' overviews, in name order after `after` (None: the
        first page): `limit` of them (1 to 100, the default), as `{"queues": [...], "next"}`, `next`
        the `after` of the next page (None: this was the last)."""
        start = "" if after is None or after == "" else _name("queue", after)
        size = _int("limit", MAX_NAMED_QUEUES if limit is None else limit, 1, MAX_NAMED_QUEUES)
        # Names sort as SQLite sorts them: by code point, which is UTF-8's byte order.
        names = [q for q in self.list_queues() if q > start][: size + 1]
        more = len(names) > size
        return {"queues": self.overview(names[:size]) if names else [], "next": names[size - 1] if more else None}
