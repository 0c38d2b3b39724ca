"""The language-neutral envelope (see docs/envelope.md): UTF-8 JSON naming a function and its arguments."""
import json
import os
from typing import Any, Dict, Optional, Sequence


def new_traceparent() -> str:
    return "00-%s-%s-01" % (os.urandom(16).hex(), os.urandom(8).hex())


def encode_envelope(fn: str, args: Sequence[Any] = (), kwargs: Optional[Dict[str, Any]] = None, *, module: Optional[str] = None,
                    traceparent: Optional[str] = None, time_limit_ms: Optional[int] = None, max_retries: Optional[int] = None,
                    origin: Optional[str] = None) -> bytes:
    """`origin`: the application's own correlation string, carried as it is (run_worker's on_done sees it)."""
    return json.dumps({
        "v": 1, "fn": fn, "args": list(args), "kwargs": dict(kwargs or {}), "module": module,
        "traceparent": traceparent or new_traceparent(), "origin": origin, "time_limit_ms": time_limit_ms, "max_retries": max_retries,
    }, separators=(",", ":")).encode("utf-8")


def decode_envelope(data: bytes) -> Dict[str, Any]:
    env = json.loads(data.decode("utf-8"))
    if not isinstance(env, dict) or not isinstance(env.get("fn"), str) or not env["fn"]:
        raise ValueError("the envelope has no function name (fn)")
    env.setdefault("args", [])
    env.setdefault("kwargs", {})
    return env
