"""Stand-in of opentelemetry.propagate.extract for a W3C traceparent."""
import re
from typing import Any, Dict

from .trace import Span, SpanContext


def extract(carrier: Dict[str, str], context: Any = None) -> Dict[str, Any]:
    m = re.match(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$", carrier.get("traceparent", ""))
    if not m:
        return {}
    return {"span": Span(None, SpanContext(int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16), True), None, None, {})}
