"""apply_limits on requests built in memory: what it cuts, what it counts, what it leaves."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracefact import semconv
from tracefact.collector.config import Limits
from tracefact.collector.limits import apply_limits

LIMITS = Limits(max_attributes_per_span=4, max_attribute_value_bytes=64)


def request(*spans: dict[str, str | int]) -> ExportTraceServiceRequest:
    out = ExportTraceServiceRequest()
    scope = out.resource_spans.add().scope_spans.add()
    for attributes in spans:
        span = Span(name="s", trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
        for key, value in attributes.items():
            any_value = (
                AnyValue(int_value=value)
                if isinstance(value, int)
                else AnyValue(string_value=value)
            )
            span.attributes.append(KeyValue(key=key, value=any_value))
        scope.spans.append(span)
    return out


def values(request: ExportTraceServiceRequest, index: int = 0) -> dict[str, object]:
    span = request.resource_spans[0].scope_spans[0].spans[index]
    return {kv.key: kv.value.string_value or kv.value.int_value for kv in span.attributes}


def test_spans_within_the_limits_are_left_as_they_are() -> None:
    received = request({"a": "x" * 60, "b": 7}, {"c": "y"})
    before = received.SerializeToString()
    counts = apply_limits(received, LIMITS)
    assert (counts.spans, counts.changes) == (2, {})
    assert received.SerializeToString() == before


def test_a_span_larger_than_the_value_limit_with_no_long_value_is_left_as_it_is() -> None:
    received = request({"a": "x" * 40, "b": "y" * 40, "c": "z" * 40})
    before = received.SerializeToString()
    assert received.resource_spans[0].scope_spans[0].spans[0].ByteSize() > 64
    counts = apply_limits(received, LIMITS)
    assert counts.changes == {}
    assert received.SerializeToString() == before


def test_long_values_are_cut_on_a_character_boundary_and_counted() -> None:
    received = request({"short": "ok", "long": "é" * 40, "n": 3}, {"fine": "x"})
    counts = apply_limits(received, LIMITS)
    assert (counts.spans, counts.changes) == (2, {(semconv.LIMIT_SIZE, semconv.LIMITED_SPAN): 1})
    assert values(received) == {"short": "ok", "long": "é" * 32, "n": 3}
    assert values(received, 1) == {"fine": "x"}


def test_attributes_past_the_count_are_dropped_and_counted_on_the_span() -> None:
    received = request({f"k{i}": "v" for i in range(6)})
    counts = apply_limits(received, LIMITS)
    assert counts.changes == {(semconv.LIMIT_COUNT, semconv.LIMITED_SPAN): 2}
    assert list(values(received)) == ["k0", "k1", "k2", "k3"]
    assert received.resource_spans[0].scope_spans[0].spans[0].dropped_attributes_count == 2


def test_events_links_resource_and_scope_are_limited_alike() -> None:
    received = request({"a": "x"})
    resource_spans = received.resource_spans[0]
    long = AnyValue(string_value="é" * 40)
    many = [KeyValue(key=f"k{i}", value=AnyValue(int_value=i)) for i in range(6)]
    resource_spans.resource.attributes.extend([*many, KeyValue(key="long", value=long)])
    resource_spans.scope_spans[0].scope.attributes.extend(many)
    span = resource_spans.scope_spans[0].spans[0]
    span.events.add(name="e").attributes.extend(many)
    listed = AnyValue()
    listed.array_value.values.extend([long, AnyValue(string_value="ok")])
    span.links.add(trace_id=b"\x03" * 16, span_id=b"\x04" * 8).attributes.append(
        KeyValue(key="list", value=listed)
    )
    counts = apply_limits(received, LIMITS)
    assert counts.changes == {
        (semconv.LIMIT_COUNT, semconv.LIMITED_RESOURCE): 3,
        (semconv.LIMIT_COUNT, semconv.LIMITED_SCOPE): 2,
        (semconv.LIMIT_COUNT, semconv.LIMITED_EVENT): 2,
        (semconv.LIMIT_SIZE, semconv.LIMITED_LINK): 1,
    }
    assert resource_spans.resource.dropped_attributes_count == 3
    assert resource_spans.scope_spans[0].scope.dropped_attributes_count == 2
    assert span.events[0].dropped_attributes_count == 2
    assert [kv.key for kv in span.events[0].attributes] == ["k0", "k1", "k2", "k3"]
    cut = [v.string_value for v in span.links[0].attributes[0].value.array_value.values]
    assert cut == ["é" * 32, "ok"]
    assert values(received) == {"a": "x"}
