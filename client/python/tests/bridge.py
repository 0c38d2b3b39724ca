"""The Python local plane over JSON lines, for the one conformance suite (test/conformance/python-plane.ts):
it reads a call per line on stdin, `{"n", "m": method, "a": [args], "k": {kwargs}}`, runs it on a
lakeshore.Dispatch in a thread of its own (blocking calls wait side by side), and answers a line
per call: `{"n", "ok": true, "v": value}` or `{"n", "ok": false, "code", "message", ...}`.
Bytes travel as `{"$b": base64}`. `events` and `journal_read` answer a line per record or frame first, `{"n", "frame"}` (journal_follow's dicts).

The plane's clock can be moved, as the suite moves the Node local planes' injected clock: `_elapse`
moves this process's `time.time` (what the plane reads its time from) ahead, and wakes the
plane's clock thread so its timed work (schedule ticks) sees the new time.

    python3 tests/bridge.py PATH NAMESPACE [OPTIONS_JSON]   (OPTIONS_JSON: the Dispatch's keyword arguments)
"""
import base64
import dataclasses
import json
import os
import sys
import threading
import time
from typing import Any

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import lakeshore as ls  # noqa: E402

BLOCKING = {"claim", "claim_many", "result", "results", "journal_read"}

_offset = [0.0]
_real_time = time.time
time.time = lambda: _real_time() + _offset[0]


def enc(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray)):
        return {"$b": base64.b64encode(bytes(v)).decode("ascii")}
    if dataclasses.is_dataclass(v):
        return enc(dataclasses.asdict(v))
    if isinstance(v, dict):
        return {k: enc(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [enc(x) for x in v]
    if isinstance(v, ls.LakeshoreError):
        return {"$error": v.code, "message": str(v)}
    if isinstance(v, ls.InvocationFailed):
        return {"$error": "invocation_failed", "message": str(v), "error": v.error}
    if isinstance(v, ls.InvocationCancelled):
        return {"$error": "invocation_cancelled", "message": str(v)}
    return v


def dec(v: Any, depth: int = 0) -> Any:
    """Bytes back from {"$b"}; they sit at most three levels down (submit_many's items), and
    free-form values (meta, an error object) below that are left as they are, however deep."""
    if isinstance(v, dict):
        if set(v) == {"$b"}:
            return base64.b64decode(v["$b"])
        if set(v) == {"$f"}:
            return float(v["$f"].replace("Infinity", "inf"))
        return v if depth > 3 else {k: dec(x, depth + 1) for k, x in v.items()}
    if isinstance(v, list):
        return v if depth > 3 else [dec(x, depth + 1) for x in v]
    return v


def main() -> None:
    d = ls.Dispatch(sys.argv[1], ns=sys.argv[2], **(json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}))
    out = threading.Lock()
    parked = [0]
    count = threading.Lock()
    stops = {}  # an events call's n -> its stop event ("_stop" sets it)

    def say(msg: Any) -> None:
        with out:
            sys.stdout.write(json.dumps(msg) + "\n")
            sys.stdout.flush()

    def call(req: Any) -> None:
        n, m, args, kwargs = req["n"], req["m"], dec(req.get("a", [])), dec(req.get("k", {}))
        blocking = m in BLOCKING and (m not in ("claim", "claim_many") or kwargs.get("wait"))
        if blocking:
            with count:
                parked[0] += 1
        answer: Any = None
        try:
            if m == "_parked":
                v: Any = parked[0]
            elif m == "_elapse":
                _offset[0] += args[0] / 1000
                d.clock.wake.set()
                v = None
            elif m == "_stop":
                stops.get(args[0], threading.Event()).set()
                v = None
            elif m == "events":
                stop = stops.setdefault(n, threading.Event())
                for rec in d.events(*args, stop=stop, **kwargs):
                    say({"n": n, "frame": enc(rec)})
                v = None
            elif m == "journal_read":
                for frame in d.journal_follow(*args, **kwargs):
                    say({"n": n, "frame": enc(frame)})
                v = None
            else:
                v = getattr(d, m)(*args, **kwargs)
            answer = {"n": n, "ok": True, "v": enc(v)}
        except ls.InvocationFailed as e:
            answer = {"n": n, "ok": False, "code": "invocation_failed", "message": str(e), "error": e.error}
        except ls.InvocationCancelled as e:
            answer = {"n": n, "ok": False, "code": "invocation_cancelled", "message": str(e)}
        except ls.LakeshoreError as e:
            answer = {"n": n, "ok": False, "code": e.code, "message": str(e)}
        except BaseException as e:  # a bug here, not a plane error: say so loudly
            answer = {"n": n, "ok": False, "code": "internal", "message": "%s: %s" % (type(e).__name__, e)}
        finally:
            # No longer waiting before the caller hears the answer: a `_parked` it sends next must
            # not count this call (it did, now and then, when this thread lost the race to it).
            if blocking:
                with count:
                    parked[0] -= 1
            say(answer)

    for line in sys.stdin:
        req = json.loads(line)
        if req.get("m") == "_close":
            break
        threading.Thread(target=call, args=(req,), daemon=True).start()
    d.close()


if __name__ == "__main__":
    main()
