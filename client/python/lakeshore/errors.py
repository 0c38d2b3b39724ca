"""Errors, one class per contract error code; the same classes the Node client raises."""
from typing import Any, Dict, Optional


class LakeshoreError(Exception):
    """An error answered by the plane: `code` is the contract's stable machine code."""

    code = "internal"
    status = 500

    def __init__(self, message: str, code: Optional[str] = None, status: Optional[int] = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        if status:
            self.status = status


class BadRequest(LakeshoreError):
    code, status = "bad_request", 400


class Unauthorized(LakeshoreError):
    code, status = "unauthorized", 401


class Forbidden(LakeshoreError):
    code, status = "forbidden", 403


class NotFound(LakeshoreError):
    code, status = "not_found", 404


class FencingConflict(LakeshoreError):
    """The caller no longer holds the invocation: its lease was lost and the job re-dispatched, or it ended."""

    code, status = "conflict", 409


class PayloadTooLarge(LakeshoreError):
    code, status = "payload_too_large", 413


class RateLimited(LakeshoreError):
    code, status = "rate_limited", 429


class StorageFull(LakeshoreError):
    """The namespace's database (its shard) is past its storage high-water mark: submits are refused
    until retention, a move or a new shard makes room; claims, acks and reads go on."""

    code, status = "storage_full", 507


class Unavailable(LakeshoreError, ConnectionError):
    """The plane could not be reached (its connection refused or cut) for as long as the client retried."""

    code, status = "unavailable", 503


class Timeout(LakeshoreError, TimeoutError):
    """A wait ran out: `result` before the invocation ended, or a journal read before its stream did."""

    code, status = "timeout", 504


class InvocationFailed(Exception):
    """`result` of an invocation that failed; `error` is its error object."""

    def __init__(self, inv_id: str, error: Dict[str, Any]):
        super().__init__("invocation %s failed: %s" % (inv_id, error.get("message")))
        self.id = inv_id
        self.error = error


class InvocationCancelled(Exception):
    def __init__(self, inv_id: str):
        super().__init__("invocation %s was cancelled" % inv_id)
        self.id = inv_id


_BY_CODE = {c.code: c for c in (BadRequest, Unauthorized, Forbidden, NotFound, FencingConflict, PayloadTooLarge, RateLimited, StorageFull, Timeout, Unavailable)}


def error_for(code: str, message: str) -> LakeshoreError:
    cls = _BY_CODE.get(code)
    return cls(message) if cls else LakeshoreError(message, code=code or "internal")
