"""Journal frames: `[kind, seq, body, meta]`, as bytes the UTF-8 JSON `[kind, seq, "<base64 body>", meta]`."""
import base64
import enum
import json
from typing import Any, Dict, Optional, Tuple


class FrameKind(enum.IntEnum):
    """A frame's kind (docs/contract.md): an int on the wire, compared as one."""
    VALUE = 0
    CHUNK = 1
    BEGIN = 2
    END = 3
    ERROR = 4


VALUE, CHUNK, BEGIN, END, ERROR = FrameKind.VALUE, FrameKind.CHUNK, FrameKind.BEGIN, FrameKind.END, FrameKind.ERROR
KIND_NAMES = {k: k.name for k in FrameKind}


def encode_frame(kind: int, seq: int, body: bytes, meta: Optional[Dict[str, Any]] = None) -> bytes:
    return json.dumps([int(kind), seq, base64.b64encode(body).decode("ascii"), meta], separators=(",", ":")).encode("utf-8")


def decode_frame(data: bytes) -> Tuple[FrameKind, int, bytes, Optional[Dict[str, Any]]]:
    kind, seq, body, *rest = json.loads(data.decode("utf-8"))
    if kind not in (0, 1, 2, 3, 4) or isinstance(kind, bool):
        raise ValueError("unknown frame kind %s: expected 0 (VALUE), 1 (CHUNK), 2 (BEGIN), 3 (END) or 4 (ERROR)" % json.dumps(kind))
    return FrameKind(kind), seq, base64.b64decode(body), (rest[0] if rest else None)
