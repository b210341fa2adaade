"""OTLP protobuf spans as the pipeline sees them, and the pipeline's results put back.

The pipeline works on the SDK's `ReadableSpan`; the collector forwards the protobuf span
it received. `view` builds the former from the latter (ids, parent, times, attributes,
events, resource and scope: what the reader and the samplers look at); `add_results`
writes what the pipeline added (attributes and events) onto the original protobuf span,
encoded by the OTLP exporter's own encoder, so an evaluated span differs from the
received one by those only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as ProtoResource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

_NO_RESOURCE = Resource({})
TRACE_ID_BYTES = 16
SPAN_ID_BYTES = 8


def value(any_value: AnyValue) -> Any:
    """An OTLP AnyValue as Python: str, bool, int, float, bytes, tuple, dict or None."""
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return tuple(value(v) for v in any_value.array_value.values)
    if kind == "kvlist_value":
        return attributes(any_value.kvlist_value.values)
    return getattr(any_value, kind)


def attributes(key_values: Iterable[KeyValue]) -> dict[str, Any]:
    return {kv.key: value(kv.value) for kv in key_values}


def has_valid_ids(span: Span) -> bool:
    """Ids of the right length and not all zero: only such spans can be evaluated."""
    return (
        len(span.trace_id) == TRACE_ID_BYTES
        and len(span.span_id) == SPAN_ID_BYTES
        and any(span.trace_id)
        and any(span.span_id)
        and len(span.parent_span_id) in (0, SPAN_ID_BYTES)
    )


def resource_of(resource: ProtoResource, schema_url: str) -> Resource:
    return Resource(attributes(resource.attributes), schema_url or None)


def view(
    span: Span,
    resource: Resource,
    scope_spans: ScopeSpans,
    marks: Mapping[str, Any] | None = None,
) -> ReadableSpan:
    """The span as an ended SDK span (call `has_valid_ids` first).

    `marks` are attributes added to the view, as the SDK's processor writes them on a
    span while it is open (a `nested` skip).
    """
    values = attributes(span.attributes)
    if marks:
        values.update(marks)
    trace_id = int.from_bytes(span.trace_id, "big")
    flags = TraceFlags(span.flags & 0xFF or TraceFlags.SAMPLED)
    context = SpanContext(trace_id, int.from_bytes(span.span_id, "big"), False, flags)
    parent = None
    if span.parent_span_id:
        # Not remote: the reader forgets a trace's documents when a remote child ends.
        parent = SpanContext(trace_id, int.from_bytes(span.parent_span_id, "big"), False, flags)
    scope = scope_spans.scope
    return ReadableSpan(
        name=span.name,
        context=context,
        parent=parent,
        resource=resource,
        attributes=values,
        events=[
            Event(e.name, attributes(e.attributes), timestamp=e.time_unix_nano) for e in span.events
        ],
        kind=_KINDS.get(span.kind, SpanKind.INTERNAL),
        start_time=span.start_time_unix_nano,
        end_time=span.end_time_unix_nano,
        instrumentation_scope=InstrumentationScope(
            scope.name, scope.version or None, scope_spans.schema_url or None
        ),
    )


_KINDS = {
    Span.SPAN_KIND_INTERNAL: SpanKind.INTERNAL,
    Span.SPAN_KIND_SERVER: SpanKind.SERVER,
    Span.SPAN_KIND_CLIENT: SpanKind.CLIENT,
    Span.SPAN_KIND_PRODUCER: SpanKind.PRODUCER,
    Span.SPAN_KIND_CONSUMER: SpanKind.CONSUMER,
}


def detached(span: Span) -> Span:
    """A copy of the span with a protobuf tree of its own.

    Results are added to it on the evaluation thread while other threads read the
    request it came from: one tree must not be written from two threads.
    """
    copy = Span()
    copy.CopyFrom(span)
    return copy


def add_results(
    span: Span, original_keys: frozenset[str], original_events: int, result: ReadableSpan
) -> None:
    """Append what the pipeline added to `result` (a copy of the view) onto `span`.

    Added means: attributes whose keys the received span did not have, and events after
    the received ones. Nothing the received span had is changed.
    """
    added = {k: v for k, v in (result.attributes or {}).items() if k not in original_keys}
    events = tuple(result.events[original_events:])
    if not added and not events:
        return
    carrier = ReadableSpan(
        name="", context=result.context, resource=_NO_RESOURCE, attributes=added, events=events
    )
    encoded = encode_spans([carrier]).resource_spans[0].scope_spans[0].spans[0]
    span.attributes.extend(encoded.attributes)
    span.events.extend(encoded.events)


def add_attributes(span: Span, added: Mapping[str, str]) -> None:
    """Append string attributes to a received span (keys it does not have)."""
    present = {kv.key for kv in span.attributes}
    span.attributes.extend(
        KeyValue(key=k, value=AnyValue(string_value=v))
        for k, v in added.items()
        if k not in present
    )


def request_of(span: ReadableSpan) -> ExportTraceServiceRequest:
    """An SDK span (a carrier of results) as a request of its own."""
    return encode_spans([span])


def single_request(resource_spans: ResourceSpans, scope_spans: ScopeSpans, span: Span) -> bytes:
    """One span under its original resource and scope, as an encoded request."""
    request = ExportTraceServiceRequest()
    out_resource = request.resource_spans.add()
    out_resource.resource.CopyFrom(resource_spans.resource)
    out_resource.schema_url = resource_spans.schema_url
    out_scope = out_resource.scope_spans.add()
    out_scope.scope.CopyFrom(scope_spans.scope)
    out_scope.schema_url = scope_spans.schema_url
    out_scope.spans.append(span)
    encoded: bytes = request.SerializeToString()
    return encoded


def selected_attributes(key_values: Iterable[KeyValue], keys: Mapping[str, None]) -> dict[str, Any]:
    """The values of the given keys only: a cheap look at the keys that decide routing."""
    return {kv.key: value(kv.value) for kv in key_values if kv.key in keys}
