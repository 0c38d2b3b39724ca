"""The receiving end of push delivery (docs/contract.md, "Push delivery"): checks a delivery's
Standard Webhooks signature and reads it. Stdlib only (hmac, hashlib)."""
import base64
import hashlib
import hmac
import json
import time
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from .errors import Unauthorized


def _header(headers: Mapping[str, Any], name: str) -> Optional[str]:
    for k, v in headers.items():
        if k.lower() == name:
            return v[0] if isinstance(v, (list, tuple)) else v
    return None


def _secret_key(s: Any) -> bytes:
    """A push secret's key bytes. A value that is not one (None from an answer that did not show the
    secret, a token pasted by mistake) is a receiver's setup error, said as such, never echoed: it is
    a secret."""
    text = (s[6:] if s.startswith("whsec_") else s) if isinstance(s, str) else ""
    try:
        if text and len(text) % 4 == 0:
            return base64.b64decode(text, validate=True)
    except ValueError:
        pass
    got = "a string of %d characters" % len(s) if isinstance(s, str) else type(s).__name__
    raise TypeError("the push secret is not one: expected the whsec_... text the plane showed once when the queue got its "
                    "push target (lakeshore queue Q --push-url URL; --rotate-push-secret makes a new one), got %s" % got)


def _body_text(body: Any) -> str:
    """The body as received, as text. A parsed body (Flask's request.get_json(), a dict) is not what
    was signed: said so, with how to get the one that was."""
    if isinstance(body, str):
        return body
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body).decode("utf-8")
    raise TypeError("the delivery's body must be its bytes or text as received (bytes or str), not %s: the signature is of "
                    "the bytes the plane sent, which parsing and writing again changes (Flask: request.get_data(); "
                    "Django: request.body; FastAPI: await request.body())"
                    % ("a parsed %s" % type(body).__name__ if isinstance(body, (dict, list)) else type(body).__name__))


def _verified(secret: Union[str, Sequence[str]], headers: Mapping[str, Any], body: Union[str, bytes, bytearray],
              tolerance_s: float, now: Optional[float]) -> Tuple[str, str, int]:
    """Checks the signature and timestamp; answers the body's text, its webhook-id and timestamp."""
    keys = [_secret_key(s) for s in (list(secret) if isinstance(secret, (list, tuple)) else [secret])]
    if not keys:
        raise TypeError("no push secret given: pass the whsec_... text, or a list of them during a rotation")
    text = _body_text(body)
    msg_id, ts, sigs = _header(headers, "webhook-id"), _header(headers, "webhook-timestamp"), _header(headers, "webhook-signature")
    if not msg_id or not ts or not sigs:
        raise Unauthorized("not a signed delivery: webhook-id, webhook-timestamp or webhook-signature is missing")
    if not ts.isdigit():
        raise Unauthorized("webhook-timestamp is not a number of seconds")
    now = time.time() if now is None else now
    if abs(now - int(ts)) > tolerance_s:
        raise Unauthorized("webhook-timestamp is %d s from now, past the tolerance of %s s" % (now - int(ts), tolerance_s))
    data = ("%s.%s.%s" % (msg_id, ts, text)).encode("utf-8")
    given = [s[3:] for s in sigs.split(" ") if s.startswith("v1,")]
    ok = False
    for key in keys:
        want = base64.b64encode(hmac.new(key, data, hashlib.sha256).digest()).decode()
        for g in given:
            ok = hmac.compare_digest(g, want) or ok
    if not ok:
        raise Unauthorized("delivery signature does not verify: not from this queue, altered (a body parsed and written again is: "
                           "give the body as received), or signed with another secret")
    return text, msg_id, int(ts)


def _job(j: Dict[str, Any], top: Dict[str, Any], msg_id: str, ts: int) -> Dict[str, Any]:
    return {"id": j["id"], "namespace": top["namespace"], "queue": top["queue"], "attempt": j["attempt"], "lease_until": j["lease_until"],
            "priority": j["priority"], "envelope": base64.b64decode(j["envelope"]), "worker_id": top["worker_id"],
            "delivery_token": j.get("delivery_token"), "webhook_id": msg_id, "timestamp": ts}


def verify_delivery(secret: Union[str, Sequence[str]], headers: Mapping[str, Any], body: Union[str, bytes],
                    tolerance_s: float = 300, now: Optional[float] = None) -> Dict[str, Any]:
    """Checks a delivery's signature (any of `secret`s: both verify during a rotation) and timestamp,
    and answers the delivery: `id`, `namespace`, `queue`, `attempt`, `lease_until`, `priority`,
    `envelope` (bytes), `worker_id`, `delivery_token`, `webhook_id`, `timestamp`. Raises
    Unauthorized when it does not verify: answer 401, and the plane retries. A queue whose
    push batch_size is above 1 sends batches: read those with verify_batch."""
    text, msg_id, ts = _verified(secret, headers, body, tolerance_s, now)
    j = json.loads(text)
    if j.get("type") == "lakeshore.batch":
        raise TypeError("this delivery is a batch (the queue's push batch_size is above 1): read it with verify_batch")
    return _job(j, j, msg_id, ts)


def verify_batch(secret: Union[str, Sequence[str]], headers: Mapping[str, Any], body: Union[str, bytes],
                 tolerance_s: float = 300, now: Optional[float] = None) -> Dict[str, Any]:
    """verify_delivery for a batch: answers `namespace`, `queue`, `worker_id`, `webhook_id`,
    `timestamp` and `jobs`, each job as verify_delivery answers one."""
    text, msg_id, ts = _verified(secret, headers, body, tolerance_s, now)
    j = json.loads(text)
    if j.get("type") != "lakeshore.batch":
        raise TypeError("this delivery is one job (the queue's push batch_size is 1): read it with verify_delivery")
    return {"namespace": j["namespace"], "queue": j["queue"], "worker_id": j["worker_id"], "webhook_id": msg_id, "timestamp": ts,
            "jobs": [_job(x, j, msg_id, ts) for x in j.get("jobs") or []]}


def batch_answer(outcomes: Mapping[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """The body of a batch's 2xx answer (json.dumps it): per job id, `{"ok": result}` acks with a
    result, `{"retry": True, "error": ..., "delay_ms": ...}` retries under the queue's attempt budget,
    `{"accepted": True}` leaves it to its delivery token. Jobs not named are acked without a result."""
    out: Dict[str, Any] = {}
    for job_id, o in outcomes.items():
        if "ok" in o:
            out[job_id] = {"status": "ok", "result": o["ok"]}
        elif o.get("retry"):
            out[job_id] = {"status": "retry", **{k: o[k] for k in ("error", "delay_ms") if k in o}}
        elif o.get("accepted"):
            out[job_id] = {"status": "accepted"}
        else:
            raise ValueError("outcome of %s must be {ok: result}, {retry: True} or {accepted: True}" % job_id)
    return {"outcomes": out}
