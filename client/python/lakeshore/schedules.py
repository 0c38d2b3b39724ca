"""Cron schedules on the Python local plane (local.py), as src/core/admin.ts has them: set, list,
remove, and the firing of due ticks (the clock's work, clock.py) with the core's statements
(sql.json). Each tick submits the schedule's envelope keyed `schedule:<name>:<tick ms>`, so a tick
submits once whichever process on the file fires it; ticks missed while no process had the plane
open submit the latest of them only. Ticks are computed by cron.py (croniter, optional)."""
import json
import sys
import time
from typing import Any, Dict, List, Optional

from . import cron as cronlib  # `cron` is set_schedule's parameter, as the contract names it
from .checks import _name, _number, _text
from .errors import BadRequest, NotFound, PayloadTooLarge

_MAX = 2 ** 53 - 1  # "never again": the core's Number.MAX_SAFE_INTEGER


def _schedule(r: Any) -> Dict[str, Any]:
    """A schedules row as the HTTP plane answers one (HttpDispatch.list_schedules)."""
    return {"queue": r["queue"], "name": r["name"], "cron": r["cron"], "timezone": r["timezone"], "envelope": bytes(r["envelope"]),
            "priority": float(r["priority"]), "next_at": int(r["next_at"]), "last_at": None if r["last_at"] is None else int(r["last_at"])}


class ScheduleVerbs:
    """Mixed into Dispatch: uses its _run, _sql, _limits, clock and feed."""

    _cron_warned = False
    _unread_warned: set = set()

    def _syntax(self) -> "cronlib._Syntax":
        s = getattr(self, "_cron_syntax", None)
        if s is None:
            s = self._cron_syntax = cronlib._Syntax(self._sql["cron_syntax"])
        return s

    def set_schedule(self, queue: str, name: str, *, cron: str, envelope: bytes, timezone: Optional[str] = None, priority: float = 0.0) -> Dict[str, Any]:
        """Sets (or replaces) the cron schedule `name` of `queue`: each tick submits `envelope`,
        keyed `schedule:<name>:<tick ms>`. 5 fields (minute first) or 6 (seconds first), read in
        the IANA `timezone` (default UTC). Needs croniter (`pip install './client/python[cron]'`)."""
        queue = _name("queue", queue)
        n = _name("schedule name", name)
        zone = None if timezone is None else cronlib.zone_of(self._syntax(), _text("timezone", timezone, 64))
        c = cronlib.Cron(self._syntax(), cron, zone)
        envelope = bytes(envelope)
        if len(envelope) > self._limits["envelope_bytes"]:
            raise PayloadTooLarge("envelope is %d bytes; the limit is %d" % (len(envelope), self._limits["envelope_bytes"]))
        now = int(time.time() * 1000)
        nxt = c.next_after(now)
        if nxt is None:
            raise BadRequest("cron %s never fires again" % json.dumps(cron))
        self._run("set_schedule", {"queue": queue, "name": n, "cron": cron, "timezone": zone, "envelope": envelope,
                                   "priority": _number("priority", priority), "next_at": nxt, "now": now})
        self.clock.soon(queue, changed=True)
        return next(s for s in self.list_schedules(queue) if s["name"] == n)

    def list_schedules(self, queue: str) -> List[Dict[str, Any]]:
        """The queue's schedules with their next ticks (`next_at`, epoch ms), by name."""
        return [_schedule(r) for r in self._run("list_schedules", {"queue": _name("queue", queue)})[0]]

    def remove_schedule(self, queue: str, name: str) -> None:
        """Removes a schedule; an unknown one is a NotFound."""
        queue, n = _name("queue", queue), _name("schedule name", name)
        if not self._run("remove_schedule", {"queue": queue, "name": n})[0]:
            raise NotFound("schedule %s of queue %s not found" % (json.dumps(n), json.dumps(queue)))

    def _fire(self, queue: str) -> Optional[int]:
        """Submits the queue's due ticks (src/core/admin.ts fire); answers when the next one is due, or None."""
        now = int(time.time() * 1000)
        if self.storage()["full"]:  # type: ignore[attr-defined]
            return now + 10_000  # no tick submits while full: look again soon (the latest missed tick goes once there is room)
        due = self._run("due_schedules", {"queue": queue, "now": now})[0]
        created = 0
        unread = set()
        for s in due:
            try:
                c = cronlib.Cron(self._syntax(), s["cron"], s["timezone"])
            except cronlib.CronUnavailable as e:
                if not ScheduleVerbs._cron_warned:  # set by a Node process on this file: it fires them itself
                    ScheduleVerbs._cron_warned = True
                    sys.stderr.write("lakeshore: %s (queue %s has schedules)\n" % (e, json.dumps(queue)))
                return None
            except Exception as e:  # set before the portable check, by a Node process: the Node planes fire it
                unread.add(s["name"])
                if s["name"] not in ScheduleVerbs._unread_warned:
                    ScheduleVerbs._unread_warned.add(s["name"])
                    sys.stderr.write("lakeshore: schedule %s of queue %s is not fired here: %s\n" % (json.dumps(s["name"]), json.dumps(queue), e))
                continue
            tick = max(c.latest_upto(now) or int(s["next_at"]), int(s["next_at"]))
            nxt = c.next_after(now) or _MAX
            made = self._run("tick", {"queue": queue, "name": s["name"], "tick": tick, "next": nxt, "next_at": int(s["next_at"]),
                                      "priority": float(s["priority"]), "envelope": bytes(s["envelope"]), "now": now})[0]
            if made:
                created += 1
                self.feed.told(queue, [{"id": made[0]["id"], "status": "queued", "attempt": 0, "submitted": True, "envelope": bytes(s["envelope"])}])
        rows = self._run("list_schedules", {"queue": queue})[0]
        # A schedule this plane cannot read is left as it is, and does not wake this clock.
        return min((int(r["next_at"]) for r in rows if r["name"] not in unread), default=None)

