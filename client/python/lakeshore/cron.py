"""Cron expressions of schedules on the Python local plane, read as the Node planes read them.

The language is the portable one of src/core/cron.ts: its patterns come from sql.json, so an
expression one plane takes, the other takes too. The times are computed by croniter, an optional
dependency (`pip install './client/python[cron]'`): without it, everything but schedules works, and
setting one says what to install. test/node/cron-parity.test.ts compares the ticks croniter and
croner (the Node planes') give for the same expressions, zones and moments."""
import re
import zoneinfo
import json
from datetime import datetime, timezone as _tz
from typing import Any, Dict, Optional

from .errors import BadRequest, LakeshoreError

try:  # the optional extra: lakeshore[cron]
    from croniter import croniter as _croniter
except ImportError:  # pragma: no cover - depends on the environment
    _croniter = None


class CronUnavailable(LakeshoreError):
    """Schedules on the local plane need croniter, which is not installed."""

    code, status = "unavailable", 503

    def __init__(self) -> None:
        super().__init__("cron schedules on the Python local plane need croniter: pip install croniter (from a lakeshore checkout: pip install './client/python[cron]')")


def available() -> bool:
    return _croniter is not None


class _Syntax:
    def __init__(self, s: Dict[str, Any]):
        self.field = re.compile(s["field"])
        self.dom = re.compile(s["day_of_month"])
        self.dow = re.compile(s["day_of_week"])
        self.zone = re.compile(s["timezone"])
        self.nicknames = set(s["nicknames"])


def syntax_error(syntax: _Syntax, expr: str) -> Optional[str]:
    """Why `expr` is outside the portable language (src/core/cron.ts cronSyntaxError), or None."""
    t = expr.strip()
    if t.lower() in syntax.nicknames:
        return None
    f = t.split()
    if len(f) not in (5, 6):
        return "expected 5 fields (minute first) or 6 (seconds first), got %d" % len(f)
    for i, x in enumerate(f):
        pat = syntax.dom if i == len(f) - 3 else syntax.dow if i == len(f) - 1 else syntax.field
        if not pat.match(x):
            extra = " or L" if i == len(f) - 3 else " or n#k" if i == len(f) - 1 else ""
            return "field %d (%s) is not made of *, numbers, names, ranges, steps%s" % (i + 1, _json(x), extra)
    return None


def _json(s: str) -> str:
    return json.dumps(s)


_ZONES: Optional[Dict[str, str]] = None


def zone_of(syntax: _Syntax, name: str) -> str:
    """An IANA zone name, canonical ("europe/berlin" is "Europe/Berlin"); an unknown one is a BadRequest."""
    global _ZONES
    unknown = BadRequest('unknown time zone %s: expected an IANA name such as "Europe/Berlin"' % _json(name))
    if not syntax.zone.match(name):
        raise unknown
    if _ZONES is None:
        _ZONES = {z.lower(): z for z in zoneinfo.available_timezones()}
    canonical = _ZONES.get(name.lower())
    if canonical is None:
        raise unknown
    return canonical


_NAMES = {n: i for i, n in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
_NAMES.update({n: i + 1 for i, n in enumerate(["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"])})
# What each nickname of the portable language stands for (croniter reads them, but not with a seconds field).
_NICKNAMES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@hourly": "0 * * * *"}
_HOURS = 3 * 3600  # past any zone's DST shift: how far around a transition ticks are looked for


def _value(v: str) -> int:
    return int(v) if v.isdigit() else _NAMES.get(v.upper(), -1)


def _fields(expr: str) -> list:
    """The 6 fields (seconds first) of an expression in the portable language."""
    f = _NICKNAMES.get(expr.strip().lower(), expr.strip()).split()
    f = f if len(f) == 6 else ["0"] + f
    f[5] = ",".join(_sunday(x) for x in f[5].split(","))
    return f


def _sunday(item: str) -> str:
    """A day-of-week item with 7 (Sunday, as 0) in the form croniter takes with a seconds field: 7 is 0."""
    if "7" not in item or "#" in item and not item.startswith("7"):
        return item
    if item.startswith("7#"):
        return "0" + item[1:]
    rng, _, step = item.partition("/")
    lo, _, hi = rng.partition("-")
    if not hi:
        return "0" if lo == "7" else item
    days = range(_value(lo), _value(hi) + 1, int(step or 1))
    return ",".join(str(d % 7) for d in days) if days else item


class Cron:
    """An expression read in a zone (None: UTC): its ticks, in epoch ms, as croner computes them.

    Across a DST change croner (the Node planes) follows Vixie cron, which croniter does not, so the
    ticks are found here on wall-clock times and then placed in the zone: a job with one value in
    each of seconds, minutes and hours (a fixed-time job) runs once at a time that occurs twice
    (its first occurrence) and, at a time that does not exist, at the end of the gap; any other
    job runs at both occurrences and skips a time that does not exist."""

    def __init__(self, syntax: _Syntax, expr: Any, timezone: Optional[str]):
        if not isinstance(expr, str) or not expr.strip():
            raise BadRequest('cron must be a cron expression, e.g. "*/5 * * * *"')
        why = syntax_error(syntax, expr)
        if why:
            raise BadRequest("cron %s is not valid: %s" % (_json(expr), why))
        f = _fields(expr)
        for x in ",".join(f).split(","):  # croner refuses a range from a larger to a smaller value; croniter wraps it
            lo, _, hi = x.split("/")[0].partition("-")
            if hi and _value(lo) > _value(hi):
                raise BadRequest("cron %s is not valid: the range %s goes from a larger value to a smaller one" % (_json(expr), x.split("/")[0]))
        if _croniter is None:
            raise CronUnavailable()
        self.expr = " ".join(f)
        self.fixed = all(v.isdigit() for v in f[:3])
        self.zone = zoneinfo.ZoneInfo(timezone) if timezone else _tz.utc
        try:
            _croniter(self.expr, datetime(2000, 1, 1), second_at_beginning=True)
        except Exception as e:  # croniter's own checks: a value out of range, a bad name
            raise BadRequest("cron %s is not valid: %s" % (_json(expr), e))

    def _wall(self, ms: float) -> datetime:
        return datetime.fromtimestamp(ms / 1000, self.zone).replace(tzinfo=None)

    def _shifts(self, a: float, b: float) -> bool:
        """Whether the zone's offset differs between the moments a and b (s)."""
        return self._offset(a) != self._offset(b)

    def _instants(self, w: datetime) -> list:
        """Where a wall-clock tick `w` runs, in epoch s: none, one, or two (a time that occurs twice)."""
        a, b = w.replace(tzinfo=self.zone, fold=0), w.replace(tzinfo=self.zone, fold=1)
        ta, tb = a.timestamp(), b.timestamp()
        if a.astimezone(_tz.utc).astimezone(self.zone).replace(tzinfo=None) != w:  # in a gap
            if not self.fixed:
                return []
            lo, hi = tb, ta  # the gap's end: where the offset changes, to the second
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if not self._shifts(tb, mid) else (lo, mid)
            return [hi]
        return [ta] if ta == tb or self.fixed else [ta, tb]

    def _offset(self, at: float) -> float:
        off = datetime.fromtimestamp(at, self.zone).utcoffset()
        return off.total_seconds() if off is not None else 0.0

    def _walk(self, ms: int, forward: bool) -> Optional[int]:
        s = ms / 1000
        # Across a fall back, wall times repeat: a tick whose wall time is up to the shift before
        # `ms`'s may still come after it (and the other way round). Near a transition the walk
        # starts that far back (or ahead) and keeps the nearest moment past `ms`.
        shift = abs(self._offset(s + _HOURS) - self._offset(s - _HOURS))
        start = self._wall(ms - 1000 * shift) if forward else self._wall(ms + 1 + 1000 * shift)
        it = _croniter(self.expr, start, second_at_beginning=True)
        best: Optional[float] = None
        for _ in range(100_000):
            try:
                w = it.get_next(datetime) if forward else it.get_prev(datetime)
            except Exception:  # no tick within croniter's search horizon
                break
            ts = [t for t in self._instants(w) if (t > s if forward else t <= s)]
            if ts:
                t = min(ts) if forward else max(ts)
                best = t if best is None else (min(best, t) if forward else max(best, t))
            if best is None:
                continue
            # Done once no transition lies between `ms` and a shift past the best tick: no wall
            # time still to come can then land nearer.
            far = best + _HOURS if forward else best - _HOURS
            if self._offset(s) == self._offset(far):
                break
            edge = w.replace(tzinfo=self.zone).timestamp()
            if edge > far if forward else edge < far:
                break
        return None if best is None else round(best * 1000)

    def next_after(self, ms: int) -> Optional[int]:
        """The first tick after `ms`; None when it never fires again."""
        return self._walk(ms, True)

    def latest_upto(self, ms: int) -> Optional[int]:
        """The latest tick at or before `ms`; None when there is none."""
        return self._walk(ms, False)
