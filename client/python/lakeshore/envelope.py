"""The language-neutral envelope (see docs/envelope.md): UTF-8 JSON naming a function and its arguments."""
import json
import math
from typing import Any, Dict, Optional, Sequence

from .tracing import current_traceparent, new_traceparent


def _finite(v: Any) -> Any:
    """v with each NaN and infinity made None: JSON has neither, and JSON.stringify writes null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def json_bytes(v: Any) -> bytes:
    """v as compact UTF-8 JSON, as a Node client's JSON.stringify writes it: a NaN or an infinity
    (a loss gone bad) is null, so every reader parses it. Raises TypeError or ValueError for a
    value JSON cannot write."""
    try:
        return json.dumps(v, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except ValueError as e:
        if "Circular" in str(e):
            raise
        return json.dumps(_finite(v), separators=(",", ":"), allow_nan=False).encode("utf-8")


def encode_envelope(fn: str, args: Sequence[Any] = (), kwargs: Optional[Dict[str, Any]] = None, *, module: Optional[str] = None,
                    traceparent: Optional[str] = None, time_limit_ms: Optional[int] = None, max_retries: Optional[int] = None,
                    origin: Optional[str] = None, extra: Optional[Dict[str, Any]] = None, trace: bool = True) -> bytes:
    """`origin`: the application's own correlation string, carried as it is (run_worker's on_done sees it).
    `traceparent`: by default the active span's (opentelemetry, when installed), else a fresh trace;
    with `trace=False`, none (a schedule's envelope, sent again at every tick: each tick a trace of its own).
    `extra`: further fields (a by-value function's `pickled` and `runtime`, docs/envelope.md)."""
    # A field that is None is left out (readers take it missing as null), as the Node client writes it.
    tp = (traceparent or current_traceparent() or new_traceparent()) if trace else None
    optional = {"module": module, "traceparent": tp, "origin": origin,
                "time_limit_ms": time_limit_ms, "max_retries": max_retries, **(extra or {})}
    return json_bytes({"v": 1, "fn": fn, "args": list(args), "kwargs": dict(kwargs or {}),
                       **{k: v for k, v in optional.items() if v is not None}})


def decode_envelope(data: bytes) -> Dict[str, Any]:
    env = json.loads(data.decode("utf-8"))
    if not isinstance(env, dict) or not isinstance(env.get("fn"), str) or not env["fn"]:
        raise ValueError("the envelope has no function name (fn)")
    env.setdefault("args", [])
    env.setdefault("kwargs", {})
    return env


def stored(data: bytes) -> Any:
    """How the planes store an envelope (the core's sql/submit.ts): as text where it is UTF-8 that
    turns back into exactly these bytes (no NUL), else as bytes. Text crosses D1's JSON as itself."""
    if b"\x00" in data:
        return bytes(data)
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return bytes(data)


def unstored(value: Any) -> bytes:
    """A stored envelope (text or bytes, whichever plane wrote it) as its bytes."""
    return value.encode("utf-8") if isinstance(value, str) else bytes(value or b"")
