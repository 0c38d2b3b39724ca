"""The operators' verbs of the Python local plane (local.py) on a queue: its settings, pause and
resume, retry and redrive, delete and purge; each on the core's statements (sql.json), checked as the core checks."""
import json
from typing import Any, Dict, List, Optional

from .checks import KEEP, _int, _name, _segment, _settings
from .errors import BadRequest, FencingConflict

FINISHED_STATES = ("succeeded", "failed", "cancelled")


class OperatorVerbs:
    """Mixed into Dispatch: uses its _run and _found."""

    def queue_info(self, queue: str) -> Dict[str, Any]:
        """`{"queue", "paused", "settings": {...every setting by its wire name, None when unset}}`."""
        rows = self._run("queue_info", {"queue": _name("queue", queue)})[0]
        q = dict(rows[0]) if rows else {}
        b = json.loads(q["backoff"]) if q.get("backoff") else None
        settings = {k: q.get(k) for k in ("lease_ms", "max_attempts", "max_running", "claims_per_second", "dead_letter_queue", "ttl_ms", "retention_ms", "journal_retention_ms", "time_limit_ms")}
        settings["retry_backoff"] = b and {k: b[k] for k in ("initial_ms", "factor", "max_ms", "jitter")}
        settings["push"] = {"url": q["push_url"], "concurrency": q["push_concurrency"], "timeout_ms": q["push_timeout_ms"],
                            "batch_size": q.get("push_batch_size") or 1} if q.get("push_url") else None
        return {"queue": queue, "paused": q.get("paused") == 1, "settings": settings}

    def configure_queue(self, queue: str, *, lease_ms: Any = KEEP, max_attempts: Any = KEEP, max_running: Any = KEEP,
                        claims_per_second: Any = KEEP, retry_backoff: Any = KEEP, dead_letter_queue: Any = KEEP, ttl_ms: Any = KEEP,
                        retention_ms: Any = KEEP, journal_retention_ms: Any = KEEP, time_limit_ms: Any = KEEP, push: Any = KEEP) -> Dict[str, Any]:
        """Changes the settings named (by their wire names); None clears one. Checked as the core
        checks them (src/core/requests.ts settingsInput). Answers queue_info."""
        named = {"lease_ms": lease_ms, "max_attempts": max_attempts, "max_running": max_running, "claims_per_second": claims_per_second,
                 "retry_backoff": retry_backoff, "dead_letter_queue": dead_letter_queue, "ttl_ms": ttl_ms, "retention_ms": retention_ms,
                 "journal_retention_ms": journal_retention_ms, "time_limit_ms": time_limit_ms, "push": push}
        queue = _name("queue", queue)
        patch = _settings(queue, {k: v for k, v in named.items() if v is not KEEP})
        self._run("configure", {"queue": queue, "patch_json": json.dumps(patch)})
        if "retention_ms" in patch or "journal_retention_ms" in patch:
            self.clock.soon(queue, changed=True)  # a new retention may bring the next pass closer
        info = self.queue_info(queue)
        # The push secret is shown once: in the answer that set or rotated it.
        if patch.get("push_secret") and info["settings"]["push"]:
            rows = self._run("queue_info", {"queue": queue})[0]
            if rows and rows[0]["push_secret"] == patch["push_secret"]:
                info["settings"]["push"]["secret"] = patch["push_secret"]
        return info

    def retry(self, inv_id: str) -> None:
        """Puts a failed job back in its queue with a fresh attempt budget (same id, journal kept);
        anything but a failed job is a FencingConflict."""
        back = self._run("retry", {"id": _segment("id", inv_id), "queue": None})[0]
        if back:
            self.feed.told(back[0]["queue"], [{"id": inv_id, "status": "queued"}])
            return
        row = self._found("retry_missed", inv_id)
        raise FencingConflict("retry refused: invocation %s is %s; only a failed invocation can be retried" % (json.dumps(inv_id), row["state"]))

    def delete(self, inv_id: str) -> None:
        """Deletes a finished job (succeeded, failed or cancelled) and its frames; a job in any other
        state raises FencingConflict (cancel it first), a missing one NotFound."""
        gone = self._run("delete", {"id": _segment("id", inv_id), "queue": None})[1]
        if gone:
            return
        row = self._found("delete_missed", inv_id)
        raise FencingConflict("delete refused: invocation %s is %s; only a finished invocation (succeeded, failed or cancelled) can be deleted: cancel it first"
                              % (json.dumps(inv_id), row["state"]))

    def purge(self, queue: str, *, state: str, limit: Optional[int] = None) -> int:
        """Deletes up to `limit` (default and most 1,000) finished jobs of one `state` (succeeded,
        failed or cancelled) of `queue`, oldest submitted first, with their frames; answers how many.
        Call it again while it answers `limit`."""
        queue = _name("queue", queue)
        if state not in FINISHED_STATES:
            raise BadRequest("state must be one of %s: only finished jobs are purged, got %s" % (", ".join(FINISHED_STATES), json.dumps(state)))
        n = _int("limit", 1000 if limit is None else limit, 1, 1000)
        return len(self._run("purge_finished", {"queue": queue, "state": state, "limit": n})[1])

    def redrive(self, queue: str, *, limit: Optional[int] = None, dead_letters: bool = False) -> List[Dict[str, str]]:
        """Retries up to `limit` (100) failed jobs of `queue`, oldest first; with `dead_letters`,
        `queue` is a dead-letter queue whose waiting letters' failed jobs go back to their own queues."""
        queue = _name("queue", queue)
        n = _int("limit", 100 if limit is None else limit, 1, 1000)
        if dead_letters:
            back = [{"id": r["id"], "queue": r["queue"]} for r in self._run("redrive_dead_letters", {"queue": queue, "limit": n})[0]]
        else:
            back = [{"id": r["id"], "queue": queue} for r in self._run("redrive", {"queue": queue, "limit": n})[0]]
        for b in back:
            self.feed.told(b["queue"], [{"id": b["id"], "status": "queued"}])
        return back

    def pause_queue(self, queue: str) -> None:
        """A paused queue takes submits but hands out nothing until resumed."""
        self._run("pause", {"queue": _name("queue", queue)})

    def resume_queue(self, queue: str) -> None:
        self._run("resume", {"queue": _name("queue", queue)})

