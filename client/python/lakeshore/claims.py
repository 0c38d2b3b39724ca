"""How the Python local plane (local.py) claims: the core's statements (sql.json) for fifo and
filo, boltzmann's draw of priority levels (src/core/claims.ts), and the handing over of what was
claimed (at most claim_bytes of envelopes; the rest goes back uncharged with the core's release)."""
import binascii
import json
import math
import random
import sqlite3
from typing import Any, Dict, List, Tuple

from .http import Claimed


def _sample_levels(levels: List[Tuple[float, int]], t: float, k: int) -> List[float]:
    """Draws `k` levels without replacement of rows, each ∝ n · exp((p - pmax) / T): the core's sampleLevels."""
    pmax = max(p for p, _ in levels)
    left = [[p, n, math.exp((p - pmax) / t)] for p, n in levels]
    out: List[float] = []
    for _ in range(k):
        total = sum(n * w for _, n, w in left)
        if total <= 0:
            break
        r = random.random() * total
        pick = next(x for x in left if x[1] > 0)
        for x in left:
            if x[1] <= 0:
                continue
            r -= x[1] * x[2]
            pick = x
            if r < 0:
                break
        pick[1] -= 1
        out.append(pick[0])
    return out



class ClaimMachinery:
    """Mixed into Dispatch: uses its _run, _claims, recent, clock, feed, book and the SQL and LIMITS it loaded."""

    def _swept(self, queue: str, results: List[Any]) -> None:
        """The sweep in front of a claim (sql/claims.ts): expired leases (on their last attempt:
        failed), due delayed jobs, TTLs run out (failed). Its failures count as failed."""
        expired, promoted, ttl = results[0], results[1], results[2]
        failed = sum(1 for r in expired if r["state"] == "failed") + len(ttl)
        moved = ([{"id": r["id"], "status": "failed" if r["state"] == "failed" else "retrying"} for r in expired]
                 + [{"id": r["id"], "status": "queued"} for r in promoted] + [{"id": r["id"], "status": "expired"} for r in ttl])
        if moved:
            self.feed.told(queue, moved)
        self.recent.count(queue, "failed", failed)
        if failed:
            self.clock.soon(queue)

    def _take(self, values: Dict[str, Any], kind: str, max: int) -> List[sqlite3.Row]:
        verb = ("claim_" if max == 1 else "claim_many_") + kind
        at = next(i for i, st in enumerate(self._sql["verbs"][verb]) if st["sql"].startswith("UPDATE invocations SET state = 'running'"))
        results = self._run(verb, values)
        self._swept(values["queue"], results)
        # In claim order (src/core/sql/claim.ts claimOrder): RETURNING's order is unspecified.
        return sorted(results[at], key=(lambda r: -r["rid"]) if kind == "filo" else (lambda r: (-r["priority"], r["rid"])))

    def _draw(self, values: Dict[str, Any], temperature: float, max: int) -> List[sqlite3.Row]:
        """Boltzmann (src/core/claims.ts): levels drawn ∝ n · exp(p / T) from queue_levels, then each
        level's oldest rows claimed; a level emptied meanwhile is drawn again, a few times."""
        got: List[sqlite3.Row] = []
        for _ in range(4):
            results = self._run("boltzmann_levels", values)
            self._swept(values["queue"], results)
            levels = [(r["priority"], r["queued"]) for r in results[-1]]
            if not levels:
                break
            picks = _sample_levels(levels, temperature, max - len(got))
            by_level: Dict[float, List[sqlite3.Row]] = {}
            for p in dict.fromkeys(picks):
                rows = self._run("claim_level", {**values, "level": p, "limit": picks.count(p)})[0]
                by_level[p] = sorted(rows, key=lambda r: r["rid"])
            # The i-th draw of a level gets that level's i-th oldest row.
            got += [by_level[p].pop(0) for p in picks if by_level[p]]
            if len(got) >= max or len(got) >= sum(n for _, n in levels):
                break
        return got

    def _hand(self, rows: List[sqlite3.Row], worker_id: str, queue: str, worker: Any = None) -> List[Claimed]:
        """Claimed rows to their worker: at most claim_bytes of envelopes (at least one job); the rest goes back uncharged."""
        out = [Claimed(id=r["id"], envelope=r["envelope_text"].encode("utf-8") if r["envelope_text"] is not None else binascii.unhexlify(r["envelope_hex"] or ""), attempt=int(r["attempt"]), queue=r["queue"],
                       lease_until=int(r["lease_until"]), priority=float(r["priority"]), budget_attempt=int(r["budget_attempt"])) for r in rows]
        kept, total = 0, 0
        while kept < len(out) and (kept == 0 or total + len(out[kept].envelope) <= self._limits["claim_bytes"]):
            total += len(out[kept].envelope)
            kept += 1
        self.book(queue).heard(worker_id, worker)
        self.feed.told(queue, [{"id": c.id, "status": "running", "attempt": c.attempt, "worker_id": worker_id, "envelope": c.envelope} for c in out])
        if kept < len(out):
            back = self._run("release", {"queue": queue, "worker_id": worker_id, "handed_json": json.dumps([[c.id, c.attempt] for c in out[kept:]])})[0]
            self.feed.told(queue, [{"id": r["id"], "status": "queued"} for r in back])
        for c in out[:kept]:
            self._claims.held(c.id, worker_id, c.attempt)
        return out[:kept]

