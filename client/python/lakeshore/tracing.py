"""Traces, through `opentelemetry` when it is installed (it is optional: without it nothing here
does anything but carry the W3C traceparent).

- An envelope encoded inside a span carries that span's context as its `traceparent`
  (encode_envelope), so a job submitted from a request, or from inside another job, joins its
  trace; outside any span it gets a fresh trace id, as before.
- SyncQueue.submit runs in a PRODUCER span `enqueue <fn>`, whose context the envelope carries.
- run_worker runs each job in a CONSUMER span `run <fn>` whose parent is the envelope's
  traceparent: producer, job and the jobs it submits form one trace tree.
"""
import os
import re
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Optional

try:  # optional
    from opentelemetry import propagate as _propagate
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - depends on the environment
    _trace = None
    _propagate = None

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def enabled() -> bool:
    """Whether opentelemetry is importable (spans are then made; recorded only if a provider is set)."""
    return _trace is not None


def new_traceparent() -> str:
    return "00-%s-%s-01" % (os.urandom(16).hex(), os.urandom(8).hex())


def current_traceparent() -> Optional[str]:
    """The active span's context as a traceparent, or None (no opentelemetry, or no valid span)."""
    if _trace is None:
        return None
    sc = _trace.get_current_span().get_span_context()
    if not sc.is_valid:
        return None
    return "00-%032x-%016x-%02x" % (sc.trace_id, sc.span_id, int(sc.trace_flags))


def trace_id_of(traceparent: Optional[str]) -> Optional[str]:
    m = _TRACEPARENT.match(traceparent or "")
    return m.group(1) if m else None


@contextmanager
def enqueue_span(fn: str, queue: str) -> Iterator[None]:
    """A submit's PRODUCER span `enqueue <fn>` (as the Node client's): the envelope encoded inside
    it carries its context, so the job's run span is its child."""
    if _trace is None:
        yield
        return
    tracer = _trace.get_tracer("lakeshore")
    with tracer.start_as_current_span("enqueue %s" % fn, kind=_trace.SpanKind.PRODUCER, attributes={
        "messaging.system": "lakeshore", "messaging.destination.name": queue, "messaging.operation.type": "send",
    }):
        yield


@contextmanager
def run_span(fn: str, traceparent: Optional[str], attrs: Dict[str, Any]) -> Iterator[Optional[str]]:
    """Runs a job's code in a CONSUMER span `run <fn>`, child of `traceparent`; yields the trace id
    the job runs in (its span's, else the traceparent's)."""
    if _trace is None or _propagate is None:
        yield trace_id_of(traceparent)
        return
    parent = _propagate.extract({"traceparent": traceparent}) if traceparent else None
    tracer = _trace.get_tracer("lakeshore")
    with tracer.start_as_current_span("run %s" % fn, context=parent, kind=_trace.SpanKind.CONSUMER, attributes={
        "messaging.system": "lakeshore", "messaging.destination.name": attrs["queue"],
        "messaging.message.id": attrs["id"], "lakeshore.attempt": attrs["attempt"],
    }) as span:
        sc = span.get_span_context()
        yield "%032x" % sc.trace_id if sc.is_valid else trace_id_of(traceparent)
