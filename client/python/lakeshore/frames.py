"""Journal frames: `[kind, seq, body, meta]`, as bytes the UTF-8 JSON `[kind, seq, "<base64 body>", meta]`."""
import base64
import json
from typing import Any, Dict, Optional, Tuple

VALUE, CHUNK, BEGIN, END, ERROR = 0, 1, 2, 3, 4
KIND_NAMES = {VALUE: "VALUE", CHUNK: "CHUNK", BEGIN: "BEGIN", END: "END", ERROR: "ERROR"}


def encode_frame(kind: int, seq: int, body: bytes, meta: Optional[Dict[str, Any]] = None) -> bytes:
    return json.dumps([kind, seq, base64.b64encode(body).decode("ascii"), meta], separators=(",", ":")).encode("utf-8")


def decode_frame(data: bytes) -> Tuple[int, int, bytes, Optional[Dict[str, Any]]]:
    kind, seq, body, *rest = json.loads(data.decode("utf-8"))
    return kind, seq, base64.b64decode(body), (rest[0] if rest else None)
