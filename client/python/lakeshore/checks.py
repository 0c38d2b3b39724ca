"""Input checks of the Python local plane: the core's (src/core/validate.ts, requests.ts), so a
bad argument gets the same BadRequest on every plane."""
import base64
import json
import math
import re
import secrets
import urllib.parse
from typing import Any, Dict, List, Optional

from .errors import BadRequest, InvocationCancelled, InvocationFailed, NotFound, error_for


# The contract's states (src/core/states.ts), and the finished ones.
STATES = ("delayed", "queued", "running", "succeeded", "failed", "cancelled")
MAX_NAMED_QUEUES = 100  # the most queues one overview request names or one page answers (src/core/limits.ts)


def unknown_state(state: Any) -> BadRequest:
    """A state the contract does not have, in the words of src/core/validate.ts's `state`."""
    return BadRequest("unknown state %s: expected delayed, queued, running, succeeded, failed or cancelled" % json.dumps(state, ensure_ascii=False))
TERMINAL = ("succeeded", "failed", "cancelled")


class _Keep:
    """A setting left out of configure_queue: it keeps its value (None clears it)."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()


def not_found(inv_id: str) -> NotFound:
    """The core's invocationNotFound: never submitted here, or purged after its queue's retention."""
    return NotFound("invocation %s not found: never submitted in this namespace, or it finished longer ago than its queue's retention "
                    "and was purged" % json.dumps(inv_id))


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")


def _quoted(v: Any) -> str:
    """A value as JSON.stringify writes it in the core's messages."""
    return json.dumps(v, ensure_ascii=False)


def _name(what: str, v: Any, max_len: int = 128) -> str:
    if not _NAME.match(_text(what, v, max_len)):
        raise BadRequest("%s %s may hold only letters, digits and . _ : - and must start with a letter or digit" % (what, _quoted(v)))
    return v


_CONTROL = re.compile(r"[\x00-\x1f\x7f]|[\ud800-\udfff]")


def _text(what: str, v: Any, max_len: int = 200) -> str:
    """Printable text, refused in the words of src/core/validate.ts's `text`."""
    if not isinstance(v, str):
        raise BadRequest("%s must be a string" % what)
    if not v:
        raise BadRequest("%s must not be empty" % what)
    if len(v) > max_len:
        raise BadRequest("%s is longer than %d characters" % (what, max_len))
    if _CONTROL.search(v):
        raise BadRequest("%s must not contain control characters or invalid unicode" % what)
    return v


def _segment(what: str, v: Any, max_len: int = 200) -> str:
    """An id or worker id: text that goes into a URL's path as one segment, so not "." or ".."
    (src/core/validate.ts, `segment`, says why)."""
    s = _text(what, v, max_len)
    if s in (".", ".."):
        raise BadRequest('%s must not be "." or "..": URLs resolve them away as path segments' % what)
    return s


def _number(what: str, v: Any, minimum: Optional[float] = None) -> float:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or (minimum is not None and v < minimum):
        raise BadRequest("%s must be a finite number%s" % (what, "" if minimum is None else " >= %s" % minimum))
    return v


def max_wait(wait: float) -> float:
    if _number("wait", wait, 0) > 60:
        raise BadRequest("wait is at most 60 seconds")
    return wait


JSON_DEPTH = 64


def _shallow(what: str, v: Any) -> Any:
    """A JSON value nested at most JSON_DEPTH levels (the core's LIMIT_JSON_DEPTH), checked without recursion."""
    stack = [(v, 1)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, (dict, list)):
            if d > JSON_DEPTH:
                raise BadRequest("%s is nested more than %d levels deep" % (what, JSON_DEPTH))
            stack.extend((y, d + 1) for y in (x.values() if isinstance(x, dict) else x))
    return v


MAX_DELAY_MS = 365 * 86_400_000
MAX_LEASE_MS = 24 * 3_600_000
BACKOFF_STEPS = 64


def _int(what: str, v: Any, lo: int, hi: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise BadRequest("%s must be a non-negative integer" % what)
    if v > hi:
        raise BadRequest("%s must be at most %d" % (what, hi))
    if v < lo:
        raise BadRequest("%s must be at least %d" % (what, lo))
    return v


def _duration(what: str, v: Any, lo: float = 0) -> Optional[int]:
    if v is None:
        return None
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        raise BadRequest("%s must be a number of milliseconds" % what)
    if v < lo:
        raise BadRequest("%s must not be negative" % what if lo == 0 else "%s must be at least %s" % (what, lo))
    if v > MAX_DELAY_MS:
        raise BadRequest("%s is %s ms; the furthest this plane allows is %d ms" % (what, v, MAX_DELAY_MS))
    return int(math.floor(v))


def _moment(what: str, seconds: Optional[float], now_ms: int) -> Optional[int]:
    """An epoch time in seconds (as time.time()), as ms, no further ahead than the plane allows."""
    if seconds is None:
        return None
    ms = _ms(_number(what, seconds, 0))
    if ms > now_ms + MAX_DELAY_MS:
        raise BadRequest("%s is more than %d ms ahead, the furthest this plane allows" % (what, MAX_DELAY_MS))
    return ms


def _backoff(b: Any) -> Optional[str]:
    """A retry backoff, checked, with each attempt's delay worked out (SQL looks it up): the core's backoffInput."""
    if b is None:
        return None
    if not isinstance(b, dict):
        raise BadRequest("retry_backoff must be an object {initial_ms, factor, max_ms, jitter} or null")
    initial = _duration("retry_backoff.initial_ms", b.get("initial_ms")) or 0
    factor = b.get("factor", 2) if b.get("factor") is not None else 2
    _number("retry_backoff.factor", factor)
    if not 1 <= factor <= 100:
        raise BadRequest("retry_backoff.factor must be between 1 and 100")
    max_ms = _duration("retry_backoff.max_ms", b.get("max_ms"))
    max_ms = max(initial, 3_600_000) if max_ms is None else max_ms
    if max_ms < initial:
        raise BadRequest("retry_backoff.max_ms must not be below initial_ms")
    jitter = b.get("jitter", 0) if b.get("jitter") is not None else 0
    _number("retry_backoff.jitter", jitter)
    if not 0 <= jitter <= 1:
        raise BadRequest("retry_backoff.jitter must be between 0 and 1")
    delays: List[int] = []
    d = float(initial)
    while len(delays) < BACKOFF_STEPS:
        delays.append(int(min(max_ms, _round(d))))
        if d >= max_ms:
            break
        d *= factor
    return json.dumps({"initial_ms": initial, "factor": factor, "max_ms": max_ms, "jitter": jitter, "delays": delays}, separators=(",", ":"))


def _round(x: float) -> int:
    """JavaScript's Math.round (half up), not Python's (half to even)."""
    return int(math.floor(x + 0.5))


def _settings(queue: str, s: Dict[str, Any]) -> Dict[str, Any]:
    """The core's settingsInput: what a patch changes, checked; a key given as None clears that setting."""
    known = ("lease_ms", "max_attempts", "max_running", "claims_per_second", "retry_backoff", "dead_letter_queue", "ttl_ms", "retention_ms", "journal_retention_ms", "time_limit_ms", "push")
    for k in s:
        if k not in known:
            raise BadRequest("unknown queue setting %r" % k)
    p: Dict[str, Any] = {}
    if "lease_ms" in s:
        p["lease_ms"] = None if s["lease_ms"] is None else _int("lease_ms", s["lease_ms"], 1, MAX_LEASE_MS)
    if "max_attempts" in s:
        p["max_attempts"] = None if s["max_attempts"] is None else _int("max_attempts", s["max_attempts"], 1, 1000)
    if "max_running" in s:
        if s["max_running"] == 0:
            raise BadRequest("max_running must be at least 1 (pause the queue to stop claims)")
        p["max_running"] = None if s["max_running"] is None else _int("max_running", s["max_running"], 1, 1_000_000)
    if "claims_per_second" in s:
        r = s["claims_per_second"]
        if r is not None and (_number("claims_per_second", r) <= 0 or r > 1_000_000):
            raise BadRequest("claims_per_second must be above 0 and at most 1,000,000")
        p["claims_per_second"] = r
    if "retry_backoff" in s:
        p["backoff"] = _backoff(s["retry_backoff"])
    if "dead_letter_queue" in s:
        dlq = s["dead_letter_queue"]
        if dlq is not None and _name("dead_letter_queue", dlq) == queue:
            raise BadRequest("dead_letter_queue must be another queue")
        p["dead_letter_queue"] = dlq
    if "ttl_ms" in s:
        p["ttl_ms"] = _duration("ttl_ms", s["ttl_ms"], 1)
    if "retention_ms" in s:
        p["retention_ms"] = _duration("retention_ms", s["retention_ms"], 1)
    if "journal_retention_ms" in s:
        p["journal_retention_ms"] = _duration("journal_retention_ms", s["journal_retention_ms"], 0)
    if "time_limit_ms" in s:
        p["time_limit_ms"] = _duration("time_limit_ms", s["time_limit_ms"], 1)
    if "push" in s:
        if s["push"] is None:
            p["push_url"] = p["push_concurrency"] = p["push_timeout_ms"] = p["push_batch_size"] = None
        else:
            t = _push(s["push"])
            p.update(push_url=t["url"], push_concurrency=t["concurrency"], push_timeout_ms=t["timeout_ms"], push_batch_size=t["batch_size"],
                     push_secret="whsec_" + base64.b64encode(secrets.token_bytes(32)).decode(), push_rotate=1 if t["rotate"] else 0)
    return p


DEFAULT_PUSH_CONCURRENCY = 8
MAX_PUSH_CONCURRENCY = 1000
DEFAULT_PUSH_TIMEOUT_MS = 30_000
MAX_PUSH_TIMEOUT_MS = 15 * 60_000
MAX_PUSH_BATCH_SIZE = 100


def _push(t: Any) -> Dict[str, Any]:
    """The core's pushInput on a local plane: https://, or http:// on loopback; concurrency, timeout, batch size."""
    if not isinstance(t, dict):
        raise BadRequest("push must be an object {url, concurrency, timeout_ms, batch_size} or null")
    for k in t:
        if k not in ("url", "concurrency", "timeout_ms", "batch_size", "rotate_secret"):
            raise BadRequest("unknown push setting %s" % json.dumps(k))
    url = t.get("url")
    if not isinstance(url, str) or not url:
        raise BadRequest("push.url must be a URL")
    if len(url) > 2048:
        raise BadRequest("push.url must be at most 2048 characters")
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise BadRequest("push.url must be https://" if u.scheme != "http" else "push.url %s is not a URL" % json.dumps(url))
    if u.username or u.password:
        raise BadRequest("push.url must not carry credentials: the receiver checks the signature instead")
    loop = u.hostname == "localhost" or u.hostname == "::1" or re.fullmatch(r"127(\.\d{1,3}){3}", u.hostname) is not None
    if u.scheme == "http" and not loop:
        raise BadRequest("push.url must be https:// (http:// only on loopback, for a plane on this machine)")
    concurrency = t.get("concurrency")
    concurrency = DEFAULT_PUSH_CONCURRENCY if concurrency is None else concurrency
    if isinstance(concurrency, bool) or not isinstance(concurrency, (int, float)) or concurrency != int(concurrency) or not 1 <= concurrency <= MAX_PUSH_CONCURRENCY:
        raise BadRequest("push.concurrency must be an integer from 1 to %d" % MAX_PUSH_CONCURRENCY)
    timeout = t.get("timeout_ms")
    timeout = DEFAULT_PUSH_TIMEOUT_MS if timeout is None else timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout != int(timeout) or not 100 <= timeout <= MAX_PUSH_TIMEOUT_MS:
        raise BadRequest("push.timeout_ms must be an integer from 100 to %d" % MAX_PUSH_TIMEOUT_MS)
    batch = t.get("batch_size")
    batch = 1 if batch is None else batch
    if isinstance(batch, bool) or not isinstance(batch, (int, float)) or batch != int(batch) or not 1 <= batch <= MAX_PUSH_BATCH_SIZE:
        raise BadRequest("push.batch_size must be an integer from 1 to %d" % MAX_PUSH_BATCH_SIZE)
    rotate = t.get("rotate_secret")
    if rotate is not None and not isinstance(rotate, bool):
        raise BadRequest("push.rotate_secret must be true or false")
    return {"url": url, "concurrency": int(concurrency), "timeout_ms": int(timeout), "batch_size": int(batch), "rotate": rotate is True}


def _ms(v: Optional[float]) -> Optional[int]:
    return None if v is None else int(round(v * 1000))


def _ids(ids: Any, distinct: bool = True) -> List[str]:
    """Many jobs' ids: 1 to 1,000 of them, each an id; with `distinct` (a wait), repeats count once."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (list, tuple)) or not ids:
        raise BadRequest("ids must be a list of one or more invocation ids")
    if len(ids) > 1000:
        raise BadRequest("a batch holds at most 1000 items; this one holds %d" % len(ids))
    checked = [_segment("id", i) for i in ids]
    return list(dict.fromkeys(checked)) if distinct else checked


def _result_wait(timeout: Optional[float]) -> float:
    """A wait on many jobs' timeout in seconds: at most the plane's 300 s result wait (wait again to wait longer)."""
    t = 30.0 if timeout is None else _number("timeout", timeout, 0)
    if t > 300:
        raise BadRequest("timeout is %ss; the longest wait this plane allows is 300 s (wait again to wait longer)" % t)
    return t


def _ended(r: Dict[str, Any], queue: str) -> Dict[str, Any]:
    """One job a wait on many answered, from its row (or the plane's JSON): its result, or the error result() raises for it."""
    inv_id, state = r["id"], r.get("state")
    if state == "succeeded":
        return {"id": inv_id, "result": bytes(r["result"] or b"")}
    if state == "failed":
        err = r.get("error")
        return {"id": inv_id, "error": InvocationFailed(inv_id, (json.loads(err) if isinstance(err, str) else err) or {"message": "failed"})}
    if state == "cancelled":
        return {"id": inv_id, "error": InvocationCancelled(inv_id)}
    if state is None and isinstance(r.get("error"), dict):  # the plane's own words
        return {"id": inv_id, "error": error_for(r["error"]["code"], r["error"]["message"])}
    return {"id": inv_id, "error": NotFound("invocation %s is not in queue %s: never submitted to it, or purged after its retention"
                                           % (json.dumps(inv_id), json.dumps(queue)))}
