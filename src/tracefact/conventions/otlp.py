"""Spans from OTLP/JSON (`ExportTraceServiceRequest`), as the conventions read them.

What the collector receives over OTLP/HTTP with JSON, and what the recorded fixtures of
real instrumentors hold.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tracefact.conventions.messages import Event


@dataclass(frozen=True, slots=True)
class OtlpSpan:
    name: str
    trace_id: int
    span_id: int
    parent_span_id: int | None
    start_time: int
    end_time: int
    attributes: dict[str, Any]
    events: list[Event]


def spans_from_otlp_json(document: Mapping[str, Any]) -> list[OtlpSpan]:
    """Every span of the request, in the order they ended."""
    spans = [span for _, span in resource_spans_from_otlp_json(document)]
    return sorted(spans, key=lambda s: s.end_time)


def resource_spans_from_otlp_json(
    document: Mapping[str, Any],
) -> Iterator[tuple[dict[str, Any], OtlpSpan]]:
    """Each span of the request with its resource's attributes, in the request's order.

    A malformed request raises KeyError, ValueError, TypeError or AttributeError.
    """
    for resource_spans in document.get("resourceSpans", []):
        resource = attributes(resource_spans.get("resource", {}).get("attributes", []))
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                parent = span.get("parentSpanId")
                yield (
                    resource,
                    OtlpSpan(
                        name=span.get("name", ""),
                        trace_id=int(span["traceId"], 16),
                        span_id=int(span["spanId"], 16),
                        parent_span_id=int(parent, 16) if parent else None,
                        start_time=int(span.get("startTimeUnixNano", 0)),
                        end_time=int(span.get("endTimeUnixNano", 0)),
                        attributes=attributes(span.get("attributes", [])),
                        events=[
                            (e.get("name", ""), attributes(e.get("attributes", [])))
                            for e in span.get("events", [])
                        ],
                    ),
                )


def attributes(key_values: list[Mapping[str, Any]]) -> dict[str, Any]:
    return {kv["key"]: any_value(kv.get("value", {})) for kv in key_values}


def any_value(value: Mapping[str, Any]) -> Any:
    """An OTLP AnyValue as Python: str, bool, int, float, tuple for arrays."""
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return tuple(any_value(v) for v in value["arrayValue"].get("values", []))
    if "kvlistValue" in value:
        return attributes(value["kvlistValue"].get("values", []))
    return None
