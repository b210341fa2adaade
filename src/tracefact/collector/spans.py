"""OTLP protobuf spans as the pipeline reads them, and its verdicts written back onto them.

The collector forwards the protobuf span it received. `record_of` gives the pipeline its
`Record` (ids, parent, name, attributes, events and resource, decoded once);
`write` appends a verdict's attributes and events to the span (nothing it had is
changed), and `carrier` builds the protobuf EVALUATOR span for a verdict whose span has
left. Values are encoded here, not by the SDK's exporter: no SDK span is built.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    InstrumentationScope,
    KeyValue,
)
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, SpanFlags

if TYPE_CHECKING:
    from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

from tracefact import semconv
from tracefact._version import __version__
from tracefact.pipeline.verdict import Record, Verdict

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
    """Every attribute decoded: a scalar read in place, one Python call less per value."""
    decoded = {}
    for kv in key_values:
        any_value = kv.value
        kind = any_value.WhichOneof("value")
        decoded[kv.key] = getattr(any_value, kind) if kind in _SCALAR_KINDS else value(any_value)
    return decoded


class LazyAttributes(Mapping[str, Any]):
    """A span's attributes, decoded on the first look at them.

    What a sampler sees: one that reads none (a ratio, the room to evaluate) costs a span
    it passes over no decoding; for one it admits, `decoded` is read once, for its record.
    """

    __slots__ = ("_decoded", "_key_values")

    def __init__(self, key_values: Iterable[KeyValue]) -> None:
        self._key_values = key_values
        self._decoded: dict[str, Any] | None = None

    @property
    def decoded(self) -> dict[str, Any]:
        if self._decoded is None:
            self._decoded = attributes(self._key_values)
        return self._decoded

    def __getitem__(self, key: str) -> Any:
        return self.decoded[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.decoded)

    def __len__(self) -> int:
        return len(self.decoded)


def has_valid_ids(span: Span) -> bool:
    """Ids of the right length and not all zero: only such spans can be evaluated."""
    return (
        len(span.trace_id) == TRACE_ID_BYTES
        and len(span.span_id) == SPAN_ID_BYTES
        and any(span.trace_id)
        and any(span.span_id)
        and len(span.parent_span_id) in (0, SPAN_ID_BYTES)
    )


_SCALARS = {
    str: "string_value",
    bool: "bool_value",
    int: "int_value",
    float: "double_value",
    bytes: "bytes_value",
}
"""The AnyValue field of each plain scalar type: set in place, no AnyValue built and copied."""
_SCALAR_KINDS = frozenset(_SCALARS.values())


def extend(repeated: RepeatedCompositeFieldContainer[KeyValue], values: Mapping[str, Any]) -> None:
    """Append `values` (None left out) to a repeated KeyValue field: all of them, or none.

    Each KeyValue is added in place, its value set on it directly: building messages to
    copy them in cost more than twice as much per attribute, and `add(key=...)` a third
    more than setting the key on the added one. A plain scalar, nearly every value, is
    set here, without a call to `_set`.
    """
    before = len(repeated)
    try:
        for key, python in values.items():
            if python is None:
                continue
            added = repeated.add()
            added.key = key
            scalar = _SCALARS.get(type(python))
            if scalar is not None:
                setattr(added.value, scalar, python)
            else:
                _set(added.value, python)
    except BaseException:  # a value that cannot be encoded: the field as it was
        del repeated[before:]
        raise


def _set(target: AnyValue, python: Any) -> None:
    """Make the empty `target` hold `python`, in place.

    A value tracefact writes: str, bool, int, float, bytes, a sequence or mapping of them;
    anything else as its `str`. The exact scalar types are looked up first, the hot path.
    """
    scalar = _SCALARS.get(type(python)) or next(
        (field for kind, field in _SCALARS.items() if isinstance(python, kind)), None
    )
    if scalar is not None:
        setattr(target, scalar, python)
    elif isinstance(python, Mapping):
        target.kvlist_value.SetInParent()  # an empty mapping is an empty list, not unset
        extend(target.kvlist_value.values, python)
    elif isinstance(python, Iterable):
        target.array_value.SetInParent()  # an empty list is an empty array, not unset
        for item in python:
            _set(target.array_value.values.add(), item)
    else:
        target.string_value = str(python)


def record_of(
    span: Span, resource: Mapping[str, Any], decoded: dict[str, Any] | None = None
) -> Record:
    """The span as the pipeline reads it (call `has_valid_ids` first): decoded once.

    `decoded`: its attributes, when they were decoded already (to sample it).
    """
    return Record(
        int.from_bytes(span.trace_id, "big"),
        int.from_bytes(span.span_id, "big"),
        int.from_bytes(span.parent_span_id, "big") if span.parent_span_id else None,
        span.name,
        attributes(span.attributes) if decoded is None else decoded,
        [(e.name, attributes(e.attributes)) for e in span.events],
        resource,
        span.end_time_unix_nano or None,
    )


def detached(span: Span) -> Span:
    """A copy of the span with a protobuf tree of its own.

    A verdict is written on it on the evaluation thread while other threads read the
    request it came from: one tree must not be written from two threads.
    """
    copy = Span()
    copy.CopyFrom(span)
    return copy


def write(span: Span, verdict: Verdict) -> None:
    """Append the verdict's attributes (keys the span does not have) and events."""
    if verdict.attributes:
        add_attributes(span, verdict.attributes)
    _add_events(span, verdict)


def _add_events(span: Span, verdict: Verdict) -> None:
    before = len(span.events)
    try:
        for event in verdict.events:
            added = span.events.add(time_unix_nano=event.time_unix_nano, name=event.name)
            extend(added.attributes, event.attributes)
    except BaseException:  # all of them or none, like the attributes
        del span.events[before:]
        raise


def add_attributes(span: Span, added: Mapping[str, Any]) -> None:
    """Append attributes to a received span (keys it does not have)."""
    present = {kv.key for kv in span.attributes}
    extend(span.attributes, {k: v for k, v in added.items() if k not in present})


_LOCAL = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | 0x01
"""Sampled, with a parent (or linked span) known not to be remote: as the SDK's encoder."""
_SCOPE = InstrumentationScope(name=semconv.EVALUATION_SCOPE, version=__version__)


def carrier(evaluated: Span, verdict: Verdict, now: int) -> Span:
    """An EVALUATOR span carrying a verdict for a span already forwarded.

    Its child in the same trace, with exactly one link to it; it lasts as long as the
    evaluation did.
    """
    span = Span(
        trace_id=evaluated.trace_id,
        span_id=os.urandom(SPAN_ID_BYTES),
        trace_state=evaluated.trace_state,
        parent_span_id=evaluated.span_id,
        flags=_LOCAL,
        name=f"evaluate {evaluated.name}",
        kind=Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=verdict.started_unix_nano or now,
        end_time_unix_nano=now,
        links=[
            Span.Link(
                trace_id=evaluated.trace_id,
                span_id=evaluated.span_id,
                trace_state=evaluated.trace_state,
                flags=_LOCAL,
            )
        ],
    )
    extend(
        span.attributes,
        {semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_EVALUATOR, **verdict.attributes},
    )
    _add_events(span, verdict)
    return span


def single_request(
    resource_spans: ResourceSpans, span: Span, scope_spans: ScopeSpans | None = None
) -> bytes:
    """One span under its original resource and scope (tracefact's own for a carrier)."""
    request = ExportTraceServiceRequest()
    out_resource = request.resource_spans.add()
    out_resource.resource.CopyFrom(resource_spans.resource)
    out_resource.schema_url = resource_spans.schema_url
    out_scope = out_resource.scope_spans.add()
    if scope_spans is None:
        out_scope.scope.CopyFrom(_SCOPE)
    else:
        out_scope.scope.CopyFrom(scope_spans.scope)
        out_scope.schema_url = scope_spans.schema_url
    out_scope.spans.append(span)
    encoded: bytes = request.SerializeToString()
    return encoded


def selected_attributes(key_values: Iterable[KeyValue], keys: Mapping[str, None]) -> dict[str, Any]:
    """The values of the given keys only: a cheap look at the keys that decide routing."""
    return {kv.key: value(kv.value) for kv in key_values if kv.key in keys}
