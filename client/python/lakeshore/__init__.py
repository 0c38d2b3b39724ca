"""lakeshore: a Python client and worker for the lakeshore dispatch plane. Standard library only
(opentelemetry and cloudpickle are used when installed)."""
from .envelope import decode_envelope, encode_envelope
from .tracing import new_traceparent
from .errors import (BadRequest, FencingConflict, Forbidden, InvocationCancelled, InvocationFailed, LakeshoreError, NotFound,
                     PayloadTooLarge, RateLimited, StorageFull, Timeout, Unauthorized, Unavailable)
from .frames import BEGIN, CHUNK, END, ERROR, VALUE, FrameKind, decode_frame, encode_frame
from .http import Claimed, HttpDispatch
from .local import Dispatch
from .plane import default_dispatch
from .push import batch_answer, verify_batch, verify_delivery
from .push_later import AsyncLaterJob, LaterJob, finish_later, finish_later_async
from .queue import DEFAULT_POOL, Handle, SyncQueue, dispatch_by_name, set_routes
from .aio import AsyncHandle, AsyncQueue
from .completed import as_completed
from .worker import JobContext, JobStopped, TimeLimitExceeded, current_job, run_worker, set_origin_for
from .version import __version__

__all__ = [
    "Dispatch", "HttpDispatch", "Claimed", "verify_delivery", "verify_batch", "batch_answer", "finish_later", "LaterJob", "finish_later_async", "AsyncLaterJob", "SyncQueue", "Handle", "as_completed", "AsyncQueue", "AsyncHandle", "dispatch_by_name", "set_routes", "DEFAULT_POOL", "default_dispatch", "run_worker", "current_job", "set_origin_for", "JobContext", "JobStopped", "TimeLimitExceeded", "encode_envelope", "decode_envelope", "new_traceparent",
    "encode_frame", "decode_frame", "FrameKind", "VALUE", "CHUNK", "BEGIN", "END", "ERROR",
    "LakeshoreError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "FencingConflict", "PayloadTooLarge",
    "RateLimited", "StorageFull", "Timeout", "Unavailable", "InvocationFailed", "InvocationCancelled",
]
