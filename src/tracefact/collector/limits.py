"""Attribute limits on received spans, applied the SDK's way: truncate and count.

Every attribute list a request carries is limited alike: a span's, its events' and
links' (what the SDK's span limits cover), and its resource's and scope's. A list
longer than `max_attributes_per_span` keeps the first ones and adds the rest to its
owner's `dropped_attributes_count`; a string value (also inside an array) longer than
`max_attribute_value_bytes` is cut on a UTF-8 character boundary. A span within the
limits, which is nearly every span, is not walked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tracefact import semconv
from tracefact.collector.config import Limits


@dataclass(slots=True)
class Limited:
    """What the limits changed in one request, by (limit, where) as the metric labels."""

    spans: int = 0
    changes: Counter[tuple[str, str]] = field(default_factory=Counter)


class _Limiter:
    def __init__(self, limits: Limits, counts: Limited) -> None:
        self.max_count = limits.max_attributes_per_span
        self.max_bytes = limits.max_attribute_value_bytes
        self.changes = counts.changes

    def over(self, owner: Any) -> bool:
        """Whether `owner` may break a limit, in two C calls.

        An encoding is longer than each of its values, so its size rules out any value
        over max_bytes: most owners never reach `limit`, about 0.5 µs an attribute.
        """
        return len(owner.attributes) > self.max_count or owner.ByteSize() > self.max_bytes

    def limit(self, owner: Any, where: str) -> None:
        """Enforce both limits on `owner.attributes`, counting on the owner and here."""
        attributes = owner.attributes
        excess = len(attributes) - self.max_count
        if excess > 0:
            del attributes[self.max_count :]
            owner.dropped_attributes_count += excess
            self.changes[semconv.LIMIT_COUNT, where] += excess
        truncated = sum(self._cut(kv.value) for kv in attributes)
        if truncated:
            self.changes[semconv.LIMIT_SIZE, where] += truncated

    def _cut(self, value: AnyValue) -> int:
        """Truncate a long string, or the long strings of an array; how many were cut."""
        if value.HasField("array_value"):
            return sum(self._cut(item) for item in value.array_value.values)
        text = value.string_value
        max_bytes = self.max_bytes
        if len(text) * 4 > max_bytes and len(encoded := text.encode()) > max_bytes:
            value.string_value = encoded[:max_bytes].decode("utf-8", "ignore")
            return 1
        return 0

    def each(self, owners: Iterable[Any], where: str) -> None:
        for owner in owners:
            if self.over(owner):
                self.limit(owner, where)


def apply_limits(request: ExportTraceServiceRequest, limits: Limits) -> Limited:
    """Enforce the attribute limits in place; returns the span count and what changed."""
    counts = Limited()
    limiter = _Limiter(limits, counts)
    for resource_spans in request.resource_spans:
        resource = resource_spans.resource
        if limiter.over(resource):
            limiter.limit(resource, semconv.LIMITED_RESOURCE)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            if limiter.over(scope):
                limiter.limit(scope, semconv.LIMITED_SCOPE)
            counts.spans += len(scope_spans.spans)
            for span in scope_spans.spans:
                if limiter.over(span):
                    limiter.limit(span, semconv.LIMITED_SPAN)
                if span.events or span.links:  # most spans have neither
                    limiter.each(span.events, semconv.LIMITED_EVENT)
                    limiter.each(span.links, semconv.LIMITED_LINK)
    return counts
