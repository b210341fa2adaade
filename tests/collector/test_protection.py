"""Bad input gets the right status, and the collector keeps serving.

One collector with a bearer token, a small body limit and small attribute limits.
"""

from __future__ import annotations

import gzip
import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.collector.harness import (
    CollectorProcess,
    attributes,
    base_config,
    fixture_spans,
    running_collector,
    wait_until,
)
from tests.fakes.otlp import OTLPReceiver, otlp_receiver
from tracefact import semconv

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MAX_BODY = 16 * 1024
MAX_SPANS = 500
MAX_ITEMS = 1000
PROTOBUF = {"Content-Type": "application/x-protobuf", **AUTH}


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[CollectorProcess, OTLPReceiver]]:
    with otlp_receiver() as upstream:
        config = base_config(upstream.endpoint)
        config["auth"] = {"bearer_token": "${COLLECTOR_TEST_TOKEN:-" + TOKEN + "}"}
        config["limits"] = {
            "max_body_bytes": MAX_BODY,
            "max_attributes_per_span": 8,
            "max_attribute_value_bytes": 64,
            "max_spans_per_request": MAX_SPANS,
            "max_items_per_request": MAX_ITEMS,
        }
        path = tmp_path_factory.mktemp("protection") / "tracefact.yaml"
        with running_collector(path, config) as collector:
            yield collector, upstream


def valid_request(trace_id: int) -> bytes:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return encode_spans(fixture_spans("openai_v2-grounded-plain", trace_id)).SerializeToString()


def post(collector: CollectorProcess, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{collector.http}/v1/traces", content=body, headers=headers)


def still_serving(collector: CollectorProcess, upstream: OTLPReceiver, trace_id: int) -> None:
    response = post(collector, valid_request(trace_id), PROTOBUF)
    assert response.status_code == 200, response.text
    key = trace_id.to_bytes(16, "big")
    from tests.collector.harness import wait_until

    assert wait_until(lambda: any(s.trace_id == key for _, s in upstream.spans()))


@pytest.mark.parametrize(
    ("body", "headers", "status", "says"),
    [
        (b"\xff\xff\xff\xff", PROTOBUF, 400, "bad protobuf"),
        (b"{not json", {"Content-Type": "application/json", **AUTH}, 400, "bad OTLP/JSON"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}',
            {"Content-Type": "application/json", **AUTH},
            400,
            "not hex",
        ),
        (b"[1, 2]", {"Content-Type": "application/json", **AUTH}, 400, "JSON object"),
        (b"plain", {"Content-Type": "text/plain", **AUTH}, 415, "unsupported content type"),
        (b"x", {**PROTOBUF, "Content-Encoding": "br"}, 415, "unsupported content encoding"),
        (b"\x1f\x8bnot gzip", {**PROTOBUF, "Content-Encoding": "gzip"}, 400, "bad gzip"),
        (
            gzip.compress(valid_request(0x61)) + b"GARBAGE",
            {**PROTOBUF, "Content-Encoding": "gzip"},
            400,
            "bad gzip",
        ),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"kind": 1e999}]}]}]}',
            {"Content-Type": "application/json", **AUTH},
            400,
            "bad OTLP/JSON",
        ),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"kind": "\\ud800"}]}]}]}',
            {"Content-Type": "application/json", **AUTH},
            400,
            "bad OTLP/JSON",
        ),
        (b"\x00" * (MAX_BODY + 1), PROTOBUF, 413, "body over"),
        (
            gzip.compress(b"\x00" * (MAX_BODY * 8)),
            {**PROTOBUF, "Content-Encoding": "gzip"},
            413,
            "decompressed body over",
        ),
        (b"", {"Content-Type": "application/x-protobuf"}, 401, "bearer token"),
        (b"", {**PROTOBUF, "Authorization": "Bearer wrong"}, 401, "bearer token"),
    ],
    ids=[
        "bad-protobuf",
        "bad-json",
        "bad-hex-id",
        "json-not-object",
        "wrong-content-type",
        "unknown-encoding",
        "bad-gzip",
        "gzip-then-garbage",
        "json-number-too-large",
        "json-lone-surrogate-enum",
        "oversize",
        "gzip-bomb",
        "no-token",
        "wrong-token",
    ],
)
def test_bad_requests_get_their_status_and_the_collector_keeps_serving(
    served: tuple[CollectorProcess, OTLPReceiver],
    body: bytes,
    headers: dict[str, str],
    status: int,
    says: str,
) -> None:
    collector, upstream = served
    response = post(collector, body, headers)
    assert response.status_code == status
    if status != 413 or "decompressed" in says:
        assert says in response.text
    still_serving(collector, upstream, 0xBAD0000 + status + len(body))


def test_every_member_of_a_gzip_body_is_read(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    """RFC 1952 allows several members one after the other; the spans of each arrive."""
    collector, upstream = served
    first, second = valid_request(0x6A1), valid_request(0x6A2)
    body = gzip.compress(first) + gzip.compress(second)
    response = post(collector, body, {**PROTOBUF, "Content-Encoding": "gzip"})
    assert response.status_code == 200

    def trace_ids() -> set[int]:
        return {int.from_bytes(s.trace_id, "big") for _, s in upstream.spans()}

    from tests.collector.harness import wait_until

    assert wait_until(lambda: {0x6A1, 0x6A2} <= trace_ids())


def chunked_post(
    collector: CollectorProcess, chunks: list[bytes], *, end: bytes = b"0\r\n\r\n"
) -> tuple[int, str, bytes]:
    """A raw chunked POST: status, Connection header and body of the reply."""
    head = (
        "POST /v1/traces HTTP/1.1\r\nHost: collector\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/x-protobuf\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode()
    port = int(collector.http.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head + b"".join(chunks) + end)
        reply = http.client.HTTPResponse(sock)
        reply.begin()
        return reply.status, reply.getheader("Connection") or "", reply.read()


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def test_a_chunked_body_is_accepted(served: tuple[CollectorProcess, OTLPReceiver]) -> None:
    collector, upstream = served
    body = valid_request(0xC4)
    parts = [body[:7], body[7:100], body[100:]]
    status, _, reply = chunked_post(
        collector, [chunk(p) for p in parts], end=b"0;x=y\r\nT: 1\r\n\r\n"
    )
    assert status == 200, reply
    key = (0xC4).to_bytes(16, "big")
    from tests.collector.harness import wait_until

    assert wait_until(lambda: any(s.trace_id == key for _, s in upstream.spans()))


def test_a_chunked_body_over_the_limit_is_refused_before_the_rest_is_sent(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    collector, upstream = served
    first = chunk(b"\x00" * (MAX_BODY // 2))
    # The second chunk's header passes the limit; its data never comes, nor the end.
    status, connection, reply = chunked_post(collector, [first, b"%x\r\n" % MAX_BODY], end=b"")
    assert status == 413
    assert connection == "close"
    assert b"body over" in reply
    still_serving(collector, upstream, 0xC5)


def test_chunked_framing_is_bounded_too(served: tuple[CollectorProcess, OTLPReceiver]) -> None:
    """One-byte chunks with long extensions: a tiny body, but more than twice the limit read."""
    collector, upstream = served
    padded = b"1;" + b"x" * 4000 + b"\r\n\x00\r\n"
    status, connection, reply = chunked_post(collector, [padded] * 10, end=b"")
    assert (status, connection) == (413, "close")
    assert b"body over" in reply
    still_serving(collector, upstream, 0xC6)


@pytest.mark.parametrize(
    ("chunks", "says"),
    [
        ([b"zz\r\nab\r\n"], b"bad chunk size"),
        ([b"-1\r\n"], b"bad chunk size"),
        ([b"0x2\r\nab\r\n"], b"bad chunk size"),
        ([b"5\r\nabc\r\n"], b"bad chunked body"),
    ],
    ids=["not-hex", "negative", "0x-prefix", "short-chunk"],
)
def test_a_malformed_chunked_body_is_a_400(
    served: tuple[CollectorProcess, OTLPReceiver], chunks: list[bytes], says: bytes
) -> None:
    collector, upstream = served
    status, connection, reply = chunked_post(collector, chunks)
    assert (status, connection) == (400, "close")
    assert says in reply
    still_serving(collector, upstream, 0xC6 + len(chunks[0]))


def test_grpc_needs_the_token_and_refuses_oversize_and_malformed_messages(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    collector, upstream = served
    with grpc.insecure_channel(collector.grpc) as channel:
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=ExportTraceServiceRequest.SerializeToString,
            response_deserializer=lambda b: b,
        )
        request = ExportTraceServiceRequest.FromString(valid_request(0x6A))
        with pytest.raises(grpc.RpcError) as missing:
            export(request, timeout=5)
        assert missing.value.code() == grpc.StatusCode.UNAUTHENTICATED
        big = ExportTraceServiceRequest.FromString(valid_request(0x6B))
        big.resource_spans[0].resource.attributes.add(key="pad").value.string_value = "x" * MAX_BODY
        with pytest.raises(grpc.RpcError) as oversize:
            export(big, timeout=5, metadata=(("authorization", f"Bearer {TOKEN}"),))
        assert oversize.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        garbage = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        with pytest.raises(grpc.RpcError) as malformed:
            garbage(b"\xff\xff\xff", timeout=5, metadata=(("authorization", f"Bearer {TOKEN}"),))
        assert malformed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "bad protobuf" in (malformed.value.details() or "")
    exporter = GrpcSpanExporter(
        endpoint=collector.grpc, insecure=True, headers={"authorization": f"Bearer {TOKEN}"}
    )
    assert (
        exporter.export(fixture_spans("openai_v2-grounded-plain", 0x6C)) == SpanExportResult.SUCCESS
    )
    still_serving(collector, upstream, 0x6D)


def test_attribute_limits_truncate_and_count(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    collector, upstream = served
    exporter = OTLPSpanExporter(endpoint=f"{collector.http}/v1/traces", headers=AUTH)
    spans = fixture_spans("openai_v2-grounded-plain", 0x11A)
    from opentelemetry.sdk.trace import ReadableSpan

    [span] = spans
    many = {f"key.{i}": "é" * 100 for i in range(12)}
    wide = ReadableSpan(
        name="wide",
        context=span.context,
        resource=span.resource,
        attributes=many,
        start_time=1,
        end_time=2,
        instrumentation_scope=span.instrumentation_scope,
    )
    assert exporter.export([wide]) == SpanExportResult.SUCCESS
    from tests.collector.harness import wait_until

    key = (0x11A).to_bytes(16, "big")
    assert wait_until(lambda: any(s.trace_id == key for _, s in upstream.spans()))
    [received] = [s for _, s in upstream.spans() if s.trace_id == key]
    values = attributes(received)
    assert list(values) == [f"key.{i}" for i in range(8)]
    assert received.dropped_attributes_count == 4
    assert all(v == "é" * 32 for v in values.values())  # 64 bytes, on a character boundary


def test_event_link_resource_and_scope_attributes_are_limited_and_counted_by_where(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import Link, SpanContext

    from tests.collector.harness import wait_until

    collector, upstream = served
    [span] = fixture_spans("openai_v2-grounded-plain", 0x11B)
    many = {f"key.{i}": i for i in range(12)}
    linked = SpanContext(0x11C, 0x22, is_remote=True)
    wide = ReadableSpan(
        name="wide",
        context=span.context,
        resource=Resource({**many, "service.name": "limited"}),
        attributes={"small": "ok"},
        events=[Event("e", {**many}, timestamp=1)],
        links=[Link(linked, {"long": "é" * 100, "list": ("x" * 100, "y")})],
        start_time=1,
        end_time=2,
        instrumentation_scope=InstrumentationScope("scope", attributes={**many}),
    )
    exporter = OTLPSpanExporter(endpoint=f"{collector.http}/v1/traces", headers=AUTH)
    assert exporter.export([wide]) == SpanExportResult.SUCCESS

    key = (0x11B).to_bytes(16, "big")

    def arrived() -> list[tuple[Any, Any, Any]]:
        return [
            (rs.resource, ss.scope, s)
            for request in upstream.requests
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for s in ss.spans
            if s.trace_id == key
        ]

    assert wait_until(lambda: bool(arrived()))
    [(resource, scope, received)] = arrived()
    assert (len(resource.attributes), resource.dropped_attributes_count) == (8, 5)
    assert (len(scope.attributes), scope.dropped_attributes_count) == (8, 4)
    [event] = received.events
    assert [kv.key for kv in event.attributes] == [f"key.{i}" for i in range(8)]
    assert event.dropped_attributes_count == 4
    [link] = received.links
    link_values = {kv.key: kv.value for kv in link.attributes}
    assert link_values["long"].string_value == "é" * 32
    assert [v.string_value for v in link_values["list"].array_value.values] == ["x" * 64, "y"]
    assert attributes(received) == {"small": "ok"}

    limited = [
        line
        for line in httpx.get(f"{collector.http}/metrics").text.splitlines()
        if line.startswith(semconv.METRIC_COLLECTOR_LIMITED.replace(".", "_"))
    ]
    for limit, where in [
        (semconv.LIMIT_COUNT, semconv.LIMITED_RESOURCE),
        (semconv.LIMIT_COUNT, semconv.LIMITED_SCOPE),
        (semconv.LIMIT_COUNT, semconv.LIMITED_EVENT),
        (semconv.LIMIT_SIZE, semconv.LIMITED_LINK),
    ]:
        assert any(f'limit="{limit}"' in line and f'where="{where}"' in line for line in limited), (
            limit,
            where,
            limited,
        )


def test_health_readiness_and_metrics(served: tuple[CollectorProcess, OTLPReceiver]) -> None:
    collector, _ = served
    assert httpx.get(f"{collector.http}/healthz").status_code == 200
    assert httpx.get(f"{collector.http}/readyz").status_code == 200
    post(collector, b"\xff\xff", PROTOBUF)
    metrics = httpx.get(f"{collector.http}/metrics").text
    rejected = [
        line
        for line in metrics.splitlines()
        if line.startswith("tracefact_collector_requests_rejected")
    ]
    assert any('reason="malformed"' in line for line in rejected), rejected
    assert "tracefact_collector_spans_received" in metrics
    assert "tracefact_collector_spans_forwarded" in metrics
    assert "tracefact_eval_spans" in metrics  # the pipeline's, on the same endpoint
    assert semconv.METRIC_COLLECTOR_QUEUE_DEPTH.replace(".", "_") in metrics


def test_an_llm_span_with_invalid_ids_is_forwarded_as_received(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    """It cannot be evaluated (its trace is unknown), so it goes on untouched, not lost."""
    collector, upstream = served
    request = ExportTraceServiceRequest.FromString(valid_request(0x1D))
    span = request.resource_spans[0].scope_spans[0].spans[0]
    span.trace_id = b"\x01\x02\x03\x04"
    span.name = "short-trace-id"
    response = post(collector, request.SerializeToString(), PROTOBUF)
    assert response.status_code == 200
    from tests.collector.harness import wait_until

    assert wait_until(lambda: any(s.name == "short-trace-id" for _, s in upstream.spans()))
    [received] = [s for _, s in upstream.spans() if s.name == "short-trace-id"]
    assert received.trace_id == span.trace_id and received.span_id == span.span_id
    assert semconv.EVAL_STATUS not in attributes(received)  # this collector's limits apply


def rejected(collector: CollectorProcess, protocol: str, reason: str) -> float:
    """`tracefact.collector.requests.rejected` for one protocol and reason, from /metrics."""
    text = httpx.get(f"{collector.http}/metrics").text
    total = 0.0
    for line in text.splitlines():
        if (
            line.startswith("tracefact_collector_requests_rejected_total{")
            and f'protocol="{protocol}"' in line
            and f'reason="{reason}"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_json_nested_too_deep_is_a_counted_400(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    collector, upstream = served
    before = rejected(collector, "http", semconv.REJECT_MALFORMED)
    deep = b'{"resourceSpans": ' + b"[" * 7000 + b"]" * 7000 + b"}"
    response = post(collector, deep, {"Content-Type": "application/json", **AUTH})
    assert response.status_code == 400
    assert "nested too deep" in response.text
    assert rejected(collector, "http", semconv.REJECT_MALFORMED) == before + 1
    still_serving(collector, upstream, 0xDEE9)


def test_a_request_over_the_span_limit_is_a_counted_413(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    """Empty spans are two bytes each: the body limit alone lets millions through."""
    collector, upstream = served
    before = rejected(collector, "http", semconv.REJECT_TOO_LARGE)
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for _ in range(MAX_SPANS + 1):
        scope.spans.add()
    body = request.SerializeToString()
    assert len(body) < MAX_BODY
    response = post(collector, body, PROTOBUF)
    assert response.status_code == 413
    assert f"over {MAX_SPANS} per request" in response.text
    assert rejected(collector, "http", semconv.REJECT_TOO_LARGE) == before + 1
    still_serving(collector, upstream, 0x5A115)


@pytest.mark.parametrize(("spans", "status"), [(MAX_SPANS, 200), (MAX_SPANS + 1, 413)])
def test_spans_are_counted_across_resources_and_scopes_among_other_fields(
    served: tuple[CollectorProcess, OTLPReceiver], spans: int, status: int
) -> None:
    """The count walks the wire format: resources, scopes and attributes around the spans."""
    collector, _ = served
    before = rejected(collector, "http", semconv.REJECT_TOO_LARGE)
    request = ExportTraceServiceRequest()
    for number in range(spans):
        if number % 100 == 0:
            resource = request.resource_spans.add(schema_url="https://example.com/schema")
            resource.resource.attributes.add(key="service.name").value.int_value = -number
        if number % 50 == 0:
            scope = resource.scope_spans.add()
            scope.scope.name = "scope"
        span = scope.spans.add(span_id=(number + 1).to_bytes(8, "big"), kind=2)
        span.start_time_unix_nano = 2**63 + number  # a fixed64 to step over
    body = request.SerializeToString()
    assert len(body) < MAX_BODY
    assert post(collector, body, PROTOBUF).status_code == status
    refused = 1 if status == 413 else 0
    assert rejected(collector, "http", semconv.REJECT_TOO_LARGE) == before + refused


def _attributes(span: Span, count: int) -> None:
    for _ in range(count):
        span.attributes.add()


def _event_attributes(span: Span, count: int) -> None:
    event = span.events.add()  # an item too
    for _ in range(count - 1):
        event.attributes.add()


def _link_attributes(span: Span, count: int) -> None:
    link = span.links.add()
    for _ in range(count - 1):
        link.attributes.add()


def _array_values(span: Span, count: int) -> None:
    array = span.attributes.add(key="a").value.array_value  # the attribute is one
    for _ in range(count - 1):
        array.values.add()


def _values_in_a_kvlist(span: Span, count: int) -> None:
    kvlist = span.attributes.add(key="k").value.kvlist_value
    inner = kvlist.values.add(key="inner").value.array_value  # two so far
    deeper = inner.values.add().array_value  # three
    for _ in range(count - 3):
        deeper.values.add()


ITEMS = {
    "span-attributes": _attributes,
    "events": lambda span, count: [span.events.add() for _ in range(count)],
    "links": lambda span, count: [span.links.add() for _ in range(count)],
    "event-attributes": _event_attributes,
    "link-attributes": _link_attributes,
    "array-values": _array_values,
    "kvlist-values": _values_in_a_kvlist,
    "resource-attributes": None,
    "scope-attributes": None,
}


def with_items(where: str, count: int) -> ExportTraceServiceRequest:
    """One span, and `count` items (attributes, events, links, values) in one place."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    scope_spans = resource_spans.scope_spans.add()
    span = scope_spans.spans.add(name="items")  # no ids: OTLP/JSON writes them in hex
    owner = {"resource-attributes": resource_spans.resource, "scope-attributes": scope_spans.scope}
    if where in owner:
        for _ in range(count):
            owner[where].attributes.add()
    else:
        add = ITEMS[where]
        assert add is not None
        add(span, count)
    return request


@pytest.mark.parametrize("media", ["protobuf", "json"])
@pytest.mark.parametrize("where", list(ITEMS))
@pytest.mark.parametrize(("count", "status"), [(MAX_ITEMS, 200), (MAX_ITEMS + 1, 413)])
def test_items_past_the_limit_are_a_counted_413_wherever_they_are(
    served: tuple[CollectorProcess, OTLPReceiver], where: str, media: str, count: int, status: int
) -> None:
    """Two bytes each on the wire, 50 to 90 decoded: counted before the request is built."""
    collector, _ = served
    before = rejected(collector, "http", semconv.REJECT_TOO_LARGE)
    request = with_items(where, count)
    if media == "json":
        body = json.dumps(json_format.MessageToDict(request), separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", **AUTH}
    else:
        body, headers = request.SerializeToString(), PROTOBUF
    assert len(body) < MAX_BODY
    response = post(collector, body, headers)
    assert response.status_code == status, response.text
    refused = 1 if status == 413 else 0
    if refused:
        assert f"over {MAX_ITEMS} per request" in response.text
    assert rejected(collector, "http", semconv.REJECT_TOO_LARGE) == before + refused


def test_array_values_nested_deeper_than_protobuf_allows_are_a_400(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    collector, upstream = served
    request = with_items("span-attributes", 0)
    value = request.resource_spans[0].scope_spans[0].spans[0].attributes.add(key="deep").value
    for _ in range(150):
        value = value.array_value.values.add()
    value.string_value = "bottom"
    body = request.SerializeToString() + bytes(2 * MAX_ITEMS)  # padded: long enough to walk
    before = rejected(collector, "http", semconv.REJECT_MALFORMED)
    response = post(collector, body, PROTOBUF)
    assert response.status_code == 400
    assert "nested too deep" in response.text
    assert rejected(collector, "http", semconv.REJECT_MALFORMED) == before + 1
    still_serving(collector, upstream, 0xDEE9D)


def test_grpc_over_the_body_span_or_item_limit_is_counted_as_rejected(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    collector, _ = served
    before = rejected(collector, "grpc", semconv.REJECT_TOO_LARGE)
    with grpc.insecure_channel(collector.grpc) as channel:
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        with pytest.raises(grpc.RpcError) as oversize:
            export(
                b"\x00" * (MAX_BODY + 1),
                timeout=5,
                metadata=(("authorization", f"Bearer {TOKEN}"),),
            )
        assert oversize.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        request = ExportTraceServiceRequest()
        scope = request.resource_spans.add().scope_spans.add()
        for _ in range(MAX_SPANS + 1):
            scope.spans.add()
        with pytest.raises(grpc.RpcError) as many:
            export(
                request.SerializeToString(),
                timeout=5,
                metadata=(("authorization", f"Bearer {TOKEN}"),),
            )
        assert many.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert f"over {MAX_SPANS} per request" in (many.value.details() or "")
        with pytest.raises(grpc.RpcError) as items:
            export(
                with_items("link-attributes", MAX_ITEMS + 1).SerializeToString(),
                timeout=5,
                metadata=(("authorization", f"Bearer {TOKEN}"),),
            )
        assert items.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert f"over {MAX_ITEMS} per request" in (items.value.details() or "")
    # gRPC answers the oversized message itself; the servicer counts it as it learns so.
    assert wait_until(lambda: rejected(collector, "grpc", semconv.REJECT_TOO_LARGE) == before + 3)


def test_a_client_that_leaves_early_costs_no_traceback_and_every_log_line_is_json(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    """The client sends a request and closes before the reply: the reply hits a closed pipe."""
    collector, upstream = served
    port = int(collector.http.rsplit(":", 1)[1])
    body = valid_request(0xB0CE)
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
            sock.sendall(
                (
                    "POST /v1/traces HTTP/1.1\r\nHost: collector\r\n"
                    f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/x-protobuf\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n"
                ).encode()
                + body
            )  # closed at once, with a reset: the collector's reply finds no reader
    deep = b'{"resourceSpans": ' + b"[" * 7000 + b"]" * 7000 + b"}"
    post(collector, deep, {"Content-Type": "application/json", **AUTH})
    still_serving(collector, upstream, 0xB0CF)
    for line in list(collector.lines):
        assert line.startswith("{") and json.loads(line), line
    assert not any("Traceback" in line and '"exception"' not in line for line in collector.lines)
