"""Attribute limits on received spans, applied the SDK's way: truncate and count.

A span with more attributes than `max_attributes_per_span` keeps the first ones and adds
the rest to its `dropped_attributes_count`; a string value longer than
`max_attribute_value_bytes` is cut (on a UTF-8 character boundary). A span within the
limits, which is nearly every span, is not touched.
"""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracefact.collector.config import Limits


@dataclass(slots=True)
class Limited:
    """What the limits changed in one request."""

    spans: int = 0
    dropped: int = 0
    truncated: int = 0


def apply_limits(request: ExportTraceServiceRequest, limits: Limits) -> Limited:
    """Enforce the attribute limits in place; returns the span count and what changed."""
    max_count = limits.max_attributes_per_span
    max_bytes = limits.max_attribute_value_bytes
    counts = Limited()
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            counts.spans += len(scope_spans.spans)
            for span in scope_spans.spans:
                attributes = span.attributes
                excess = len(attributes) - max_count
                if excess > 0:
                    del attributes[max_count:]
                    span.dropped_attributes_count += excess
                    counts.dropped += excess
                for kv in attributes:
                    text = kv.value.string_value
                    if len(text) * 4 > max_bytes and len(encoded := text.encode()) > max_bytes:
                        cut = encoded[:max_bytes].decode("utf-8", "ignore")
                        kv.value.string_value = cut
                        counts.truncated += 1
    return counts
