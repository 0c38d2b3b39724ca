"""The journal's verbs of the Python local plane (local.py): append, read, follow, page, trim,
each on the core's statements (sql.json), the misses diagnosed as src/core/sql/append.ts does."""
import json
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

from .checks import TERMINAL, _int, _segment, _shallow, not_found
from .errors import BadRequest, FencingConflict, PayloadTooLarge, Timeout
from .frames import decode_frame, encode_frame



#: Most frame bytes one journal page holds past its first frame (src/core/sql/journal-read.ts).
PAGE_BYTES = 1 << 20

class JournalVerbs:
    """Mixed into Dispatch: uses its _run, _claims, _holder, _same, _holds, _stale and LIMITS."""

    def journal_append(self, inv_id: str, seq: Optional[int], frame_bytes: bytes, *, final: bool = False,
                       worker_id: Optional[str] = None, attempt: Optional[int] = None) -> int:
        """Appends a frame as the worker that claimed `inv_id` here (or `worker_id`); `seq=None` takes the next."""
        held = self._claims.get(_segment("id", inv_id))
        if worker_id is None and held is None:
            raise BadRequest("journal_append(%s): no worker_id given and this Dispatch did not claim %s" % (inv_id, inv_id))
        if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool) or seq < 0):
            raise BadRequest("seq must be a non-negative integer")
        try:
            kind, _, body, meta = decode_frame(frame_bytes)
        except ValueError as e:
            if str(e).startswith("unknown frame kind"):
                raise BadRequest(str(e))  # as the core says it of a frame's kind
            raise BadRequest("frame bytes are not a frame [kind, seq, body_base64, meta]: %s" % e)
        if meta is not None and not isinstance(meta, dict):
            raise BadRequest("frame meta must be an object or null")
        _shallow("meta", meta)
        if len(body) > self._limits["frame_bytes"]:
            raise PayloadTooLarge("frame body is %d bytes; the limit is %d" % (len(body), self._limits["frame_bytes"]))
        h = self._holder(inv_id, worker_id if worker_id is not None else held[0], attempt)
        values = {"id": inv_id, "queue": None, "seq": seq, "kind": int(kind), "body": body, "meta_json": None if meta is None else json.dumps(meta), **h}
        rows = self._run("append_final" if final else "append", values)[0]
        if rows:
            return int(rows[0]["seq"])
        found, facts = self._run("append_missed", values)
        if not found:
            raise not_found(inv_id)
        row, f = found[0], facts[0]
        taken = f["attempt"] is not None
        if seq is not None and taken and self._same(row, h) and f["attempt"] == row["attempt"]:
            return seq
        if not self._holds(row, h):
            raise self._stale("append", inv_id, row, h)
        top = max(-1 if f["last_seq"] is None else f["last_seq"], f["trimmed"])
        at = seq if seq is not None else top + 1
        if at >= self._limits["max_frames"]:
            raise PayloadTooLarge("the journal of invocation %s is full: at most %d frames" % (json.dumps(inv_id), self._limits["max_frames"]))
        if taken:
            raise FencingConflict("seq %d of invocation %s was already written by attempt %s" % (at, json.dumps(inv_id), f["attempt"]))
        if f["last_final"] == 1 and f["last_attempt"] == row["attempt"]:
            raise FencingConflict("attempt %d of invocation %s already ended its stream: nothing may follow it" % (row["attempt"], json.dumps(inv_id)))
        if at <= top:
            raise FencingConflict("seq %d of invocation %s is not after the journal's last seq %d: a reader may already be past it" % (at, json.dumps(inv_id), top))
        raise self._stale("append", inv_id, row, h)

    def journal_read(self, inv_id: str, *, since: int = -1, timeout: float = 30.0, poll: float = 0.02) -> Iterator[Tuple[int, bytes]]:
        """Yields (seq, frame bytes) as frames are written, until a final frame or the end of the
        invocation; raises Timeout when `timeout` seconds pass with no frame."""
        for f in self.journal_follow(inv_id, since=since, timeout=timeout, poll=poll):
            yield f["seq"], encode_frame(f["kind"], f["seq"], f["body"], f["meta"])

    def journal_follow(self, inv_id: str, *, since: int = -1, timeout: float = 30.0, poll: float = 0.02) -> Iterator[Dict[str, Any]]:
        """journal_read's frames as journal_page gives them (with `attempt` and `final`)."""
        _segment("id", inv_id)
        cursor, deadline = since, time.monotonic() + timeout
        while True:
            page = self.journal_page(inv_id, since=cursor)
            for f in page["frames"]:
                cursor = f["seq"]
                deadline = time.monotonic() + timeout
                yield f
            if page["done"]:
                return
            if not page["frames"]:
                if time.monotonic() >= deadline:
                    raise Timeout("journal of %s wrote nothing for %ss and has not ended" % (inv_id, timeout))
                time.sleep(poll)

    def journal_page(self, inv_id: str, *, since: int = -1, limit: int = 1000) -> Dict[str, Any]:
        """One read of the journal (src/core/sql/journal-read.ts): `{"frames": [...], "next",
        "trimmed_before", "done", "state", "outcome"}`; frames as dicts of seq, kind, body, meta,
        attempt, final."""
        _int("limit", limit, 1, 10_000)
        inv, frames = self._run("read", {"id": _segment("id", inv_id), "queue": None, "since": since, "limit": limit})
        if not inv:
            raise not_found(inv_id)
        row = inv[0]
        # The frames up to the first read without its body (a large one past the first few), or to
        # PAGE_BYTES: the rest are the next page's (src/core/sql/journal-read.ts).
        out: List[Dict[str, Any]] = []
        size = 0
        for f in frames:
            if f["body"] is None or size >= PAGE_BYTES:
                break
            out.append({"seq": f["seq"], "kind": f["kind"], "body": bytes(f["body"]), "meta": None if f["meta"] is None else json.loads(f["meta"]),
                        "attempt": f["attempt"], "final": bool(f["final"])})
            size += len(out[-1]["body"]) + (len(f["meta"]) if f["meta"] is not None else 0)
        terminal = row["state"] in TERMINAL
        done = bool(out and out[-1]["final"]) or (terminal and len(out) == len(frames) and len(out) < limit)
        outcome = None
        if done and terminal:
            outcome = {"state": row["state"], **({"result": None if row["result"] is None else bytes(row["result"])} if row["state"] == "succeeded"
                                                  else {"error": json.loads(row["error"]) if row["error"] else {"message": row["state"]}})}
        return {"frames": out, "next": out[-1]["seq"] if out else since, "trimmed_before": row["trimmed"], "done": done, "state": row["state"], "outcome": outcome}

    def journal_trim(self, inv_id: str, *, keep_last: int = 0) -> int:
        _int("keep_last", keep_last, 0, 2 ** 53 - 1)
        updated, deleted = self._run("trim", {"id": _segment("id", inv_id), "queue": None, "keep_last": keep_last})
        if not updated:
            raise not_found(inv_id)
        return deleted.changes

