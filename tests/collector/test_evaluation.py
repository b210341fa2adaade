"""LLM spans of every instrumentor arrive upstream evaluated; everything else as sent.

One collector process for the module (`tracefact collector --config ...`), the SDK's
real OTLP/HTTP and OTLP/gRPC exporters as senders, and two real upstream receivers (one
HTTP, one gRPC) that must both get every span.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

from tests.collector.harness import (
    CollectorProcess,
    attributes,
    base_config,
    fixture_spans,
    running_collector,
)
from tests.conventions.fixtures import AGENT_FIXTURES, fixture_names
from tests.fakes.agents import CALL_ID
from tests.fakes.instrumentors import DOCUMENT
from tests.fakes.otlp import OTLPReceiver, grpc_otlp_receiver, otlp_receiver
from tracefact import semconv
from tracefact.conventions import span_role

LABEL = "tracefact.eval.hallucination.label"
_trace_ids = itertools.count(0x5EED0000_00000000_00000000_00000001)


class Setup:
    def __init__(
        self, collector: CollectorProcess, http_up: OTLPReceiver, grpc_up: OTLPReceiver
    ) -> None:
        self.collector = collector
        self.http_up = http_up
        self.grpc_up = grpc_up
        self.http = OTLPSpanExporter(endpoint=f"{collector.http}/v1/traces")
        self.grpc = GrpcSpanExporter(endpoint=collector.grpc, insecure=True)

    def send(self, spans: list[ReadableSpan], via: str = "http") -> None:
        exporter = self.http if via == "http" else self.grpc
        assert exporter.export(spans) == SpanExportResult.SUCCESS

    def received(self, trace_id: int, count: int) -> list[Span]:
        """The trace's spans as both upstreams got them (asserted equal)."""
        key = trace_id.to_bytes(16, "big")

        def of(receiver: OTLPReceiver) -> list[Span]:
            return [s for _, s in receiver.spans() if s.trace_id == key]

        for receiver in (self.http_up, self.grpc_up):
            assert _wait(lambda r=receiver: len(of(r)) >= count), [s.name for s in of(receiver)]
        by_http = sorted(of(self.http_up), key=lambda s: s.span_id)
        by_grpc = sorted(of(self.grpc_up), key=lambda s: s.span_id)
        assert [s.SerializeToString() for s in by_http] == [s.SerializeToString() for s in by_grpc]
        assert len(by_http) == count, [s.name for s in by_http]
        return by_http


def _wait(predicate: Any, timeout: float = 20.0) -> bool:
    from tests.collector.harness import wait_until

    return wait_until(predicate, timeout)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with otlp_receiver() as http_up, grpc_otlp_receiver() as grpc_up:
        config = base_config(http_up.endpoint)
        config["upstreams"][0]["compression"] = "gzip"
        config["upstreams"].append(
            {"endpoint": grpc_up.endpoint, "protocol": "grpc", "compression": "gzip"}
        )
        path = tmp_path_factory.mktemp("collector") / "tracefact.yaml"
        with running_collector(path, config) as collector:
            yield Setup(collector, http_up, grpc_up)


def retriever_span(trace_id: int, span_id: int = 0xD0C) -> list[ReadableSpan]:
    """An OpenInference RETRIEVER span returning the document, as an app would send it."""
    from opentelemetry.sdk.trace import ReadableSpan as Readable
    from opentelemetry.trace import SpanContext, TraceFlags

    from tests.collector.harness import RESOURCE, SCOPE

    return [
        Readable(
            name="retrieve",
            context=SpanContext(trace_id, span_id, False, TraceFlags(1)),
            parent=SpanContext(trace_id, 0xA99, False, TraceFlags(1)),
            resource=RESOURCE,
            attributes={
                "openinference.span.kind": "RETRIEVER",
                "retrieval.documents.0.document.content": DOCUMENT,
            },
            start_time=1,
            end_time=2,
            instrumentation_scope=SCOPE,
        )
    ]


ANSWERS = [n for n in fixture_names() if "-grounded-" in n or "-invented-" in n]
RETRIEVERS = [n for n in fixture_names() if "-retriever-" in n]


@pytest.mark.parametrize("name", ANSWERS)
def test_llm_spans_of_every_instrumentor_arrive_evaluated(setup: Setup, name: str) -> None:
    """Documents from a separate request of the same trace ground the answer.

    Half the fixtures send the retriever span first, half after the LLM span (within
    the window); half go over HTTP, half over gRPC.
    """
    index = ANSWERS.index(name)
    trace_id = next(_trace_ids)
    via = "http" if index % 2 else "grpc"
    llm = fixture_spans(name, trace_id)
    if index % 4 < 2:
        setup.send(retriever_span(trace_id), via)
        setup.send(llm, via)
    else:
        setup.send(llm, via)
        setup.send(retriever_span(trace_id), via)
    received = setup.received(trace_id, len(llm) + 1)
    [span] = [s for s in received if span_role(attributes(s)) == "llm"]
    values = attributes(span)
    assert values[semconv.EVAL_STATUS] == "ok", values
    assert values[semconv.CONTEXTS_SOURCE] == "retrieval"
    assert values[semconv.CONTEXTS] == (DOCUMENT,)
    assert values[LABEL] == ("hallucinated" if "-invented-" in name else "factual")
    assert [e.name for e in span.events][-1] == semconv.GEN_AI_EVALUATION_EVENT


@pytest.mark.parametrize("later", [False, True], ids=["retriever-first", "retriever-later"])
@pytest.mark.parametrize("name", RETRIEVERS)
def test_retriever_spans_of_each_convention_ground_a_separate_request(
    setup: Setup, name: str, later: bool
) -> None:
    trace_id = next(_trace_ids)
    spans = fixture_spans(name, trace_id)
    retrievers = [s for s in spans if span_role(s.attributes or {}) == "retriever"]
    rest = [s for s in spans if s not in retrievers]
    first, second = (rest, retrievers) if later else (retrievers, rest)
    setup.send(first)
    setup.send(second)
    received = setup.received(trace_id, len(spans))
    [span] = [s for s in received if span_role(attributes(s)) == "llm"]
    values = attributes(span)
    assert values[semconv.EVAL_STATUS] == "ok", values
    assert values[semconv.CONTEXTS_SOURCE] == "retrieval"
    assert DOCUMENT in " ".join(values[semconv.CONTEXTS])
    assert values[LABEL] == "factual"


AGENT_RUNS = fixture_names(AGENT_FIXTURES)


@pytest.mark.parametrize("name", AGENT_RUNS)
def test_an_agent_trace_is_judged_on_its_tool_result(setup: Setup, name: str) -> None:
    """Tool spans sent after the LLM spans (within the window) still count.

    The step that only asks for the tool is skipped; the agent's own span is not judged.
    """
    trace_id = next(_trace_ids)
    spans = fixture_spans(name, trace_id, AGENT_FIXTURES)
    tools = [s for s in spans if span_role(s.attributes or {}) == "tool"]
    setup.send([s for s in spans if s not in tools])
    setup.send(tools)
    received = setup.received(trace_id, len(spans))
    by_status = {
        values[semconv.EVAL_STATUS]: values
        for values in map(attributes, received)
        if span_role(values) == "llm"
    }
    step, final = by_status["skipped"], by_status["ok"]
    assert final[semconv.EVAL_STATUS] == "ok", final
    assert final[semconv.CONTEXTS_SOURCE] == semconv.CONTEXT_SOURCE_TOOL
    assert final[semconv.CONTEXTS] == (DOCUMENT,)
    assert final[semconv.CONTEXTS_TOOL_CALLS] == (CALL_ID,)
    assert final[LABEL] == ("hallucinated" if "-invented-" in name else "factual")
    assert step[semconv.EVAL_SKIP_REASON] == semconv.SKIP_TOOL_CALL
    for span in received:
        if span_role(attributes(span)) != "llm":
            assert not any(key.startswith("tracefact.") for key in attributes(span))


def ended_span(
    trace_id: int, span_id: int, name: str, values: dict[str, Any], end: int
) -> ReadableSpan:
    """A span of the trace that ends at `end`, under the same parent as the rest."""
    from opentelemetry.sdk.trace import ReadableSpan as Readable
    from opentelemetry.trace import SpanContext, TraceFlags

    from tests.collector.harness import RESOURCE, SCOPE

    return Readable(
        name=name,
        context=SpanContext(trace_id, span_id, False, TraceFlags(1)),
        parent=SpanContext(trace_id, 0xA9, False, TraceFlags(1)),
        resource=RESOURCE,
        attributes=values,
        start_time=end - 1,
        end_time=end,
        instrumentation_scope=SCOPE,
    )


ANSWER_WITHOUT_CONTEXT = {
    semconv.OPENINFERENCE_SPAN_KIND: "LLM",
    semconv.INPUT_VALUE: "How tall is the Eiffel Tower?",
    semconv.OUTPUT_VALUE: "The Eiffel Tower is 330 metres tall.",
}
"""An LLM span whose prompt holds no evidence: only the trace's other spans can ground it."""


@pytest.mark.parametrize("tool_ends", [5, 15], ids=["before", "after"])
def test_a_tool_span_grounds_the_llm_spans_that_ended_after_it(
    setup: Setup, tool_ends: int
) -> None:
    trace_id = next(_trace_ids)
    tool = {
        semconv.GEN_AI_OPERATION_NAME: "execute_tool",
        semconv.GEN_AI_TOOL_NAME: "landmark_facts",
        semconv.GEN_AI_TOOL_CALL_ID: "call_1",
        semconv.GEN_AI_TOOL_CALL_RESULT: DOCUMENT,
    }
    setup.send([ended_span(trace_id, 0x11, "chat", ANSWER_WITHOUT_CONTEXT, 10)])
    setup.send([ended_span(trace_id, 0x70, "execute_tool landmark_facts", tool, tool_ends)])
    [span] = [s for s in setup.received(trace_id, 2) if span_role(attributes(s)) == "llm"]
    values = attributes(span)
    if tool_ends == 5:
        assert values[semconv.CONTEXTS_SOURCE] == semconv.CONTEXT_SOURCE_TOOL, values
        assert values[semconv.CONTEXTS_TOOL_CALLS] == ("call_1",)
    else:
        assert values[semconv.EVAL_SKIP_REASON] == semconv.SKIP_NO_CONTEXTS, values


@pytest.mark.parametrize("retriever_ends", [5, 15], ids=["before", "after"])
def test_a_retriever_span_grounds_the_llm_spans_that_ended_after_it(
    setup: Setup, retriever_ends: int
) -> None:
    """Even when the retriever span arrives first: its documents came too late for the rest."""
    trace_id = next(_trace_ids)
    retriever = {
        semconv.OPENINFERENCE_SPAN_KIND: "RETRIEVER",
        "retrieval.documents.0.document.content": DOCUMENT,
    }
    setup.send([ended_span(trace_id, 0x70, "retrieve", retriever, retriever_ends)])
    setup.send([ended_span(trace_id, 0x11, "chat", ANSWER_WITHOUT_CONTEXT, 10)])
    [span] = [s for s in setup.received(trace_id, 2) if span_role(attributes(s)) == "llm"]
    values = attributes(span)
    if retriever_ends == 5:
        assert values[semconv.CONTEXTS_SOURCE] == "retrieval", values
        assert values[semconv.CONTEXTS] == (DOCUMENT,)
    else:
        assert values[semconv.EVAL_SKIP_REASON] == semconv.SKIP_NO_CONTEXTS, values


def _kv(key: str, value: AnyValue) -> KeyValue:
    return KeyValue(key=key, value=value)


def exotic_request(trace_id: int, llm: bool) -> ExportTraceServiceRequest:
    """A request using every field and value type OTLP has, for byte comparisons."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add(schema_url="https://opentelemetry.io/schemas/1")
    resource_spans.resource.attributes.extend(
        [
            _kv("service.name", AnyValue(string_value="exotic")),
            _kv("host.cores", AnyValue(int_value=2)),
        ]
    )
    resource_spans.resource.dropped_attributes_count = 3
    scope_spans = resource_spans.scope_spans.add(schema_url="https://example.com/scope")
    scope_spans.scope.name = "exotic.scope"
    scope_spans.scope.version = "9.9"
    scope_spans.scope.attributes.append(_kv("scope.attr", AnyValue(bool_value=True)))
    span = scope_spans.spans.add(
        trace_id=trace_id.to_bytes(16, "big"),
        span_id=(0xE1).to_bytes(8, "big"),
        parent_span_id=(0xE0).to_bytes(8, "big"),
        trace_state="vendor=value",
        name="exotic",
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=1_700_000_000_000_000_000,
        end_time_unix_nano=1_700_000_000_500_000_000,
        dropped_attributes_count=4,
        dropped_events_count=5,
        dropped_links_count=6,
        flags=0x301,
        status=Status(code=Status.STATUS_CODE_ERROR, message="it failed"),
    )
    span.attributes.extend(
        [
            _kv("str", AnyValue(string_value="text ☃")),
            _kv("int", AnyValue(int_value=-(2**62))),
            _kv("double", AnyValue(double_value=0.1)),
            _kv("bool", AnyValue(bool_value=False)),
            _kv("bytes", AnyValue(bytes_value=b"\x00\xff")),
            _kv(
                "array",
                AnyValue(
                    array_value=ArrayValue(
                        values=[AnyValue(int_value=1), AnyValue(string_value="two")]
                    )
                ),
            ),
            _kv(
                "kvlist",
                AnyValue(
                    kvlist_value=KeyValueList(values=[_kv("nested", AnyValue(double_value=2.5))])
                ),
            ),
            _kv("empty", AnyValue()),
        ]
    )
    if llm:
        span.attributes.extend(
            [
                _kv("openinference.span.kind", AnyValue(string_value="LLM")),
                _kv("input.value", AnyValue(string_value="How tall is the Eiffel Tower?")),
                _kv("output.value", AnyValue(string_value="It is 330 metres tall.")),
                _kv("tracefact.contexts", _strings(DOCUMENT)),
            ]
        )
    event = span.events.add(name="exotic.event", time_unix_nano=1_700_000_000_100_000_000)
    event.attributes.append(_kv("event.attr", AnyValue(int_value=7)))
    event.dropped_attributes_count = 1
    link = span.links.add(
        trace_id=(0xAB).to_bytes(16, "big"),
        span_id=(0xCD).to_bytes(8, "big"),
        trace_state="k=v",
        flags=1,
    )
    link.attributes.append(_kv("link.attr", AnyValue(string_value="linked")))
    return request


def _strings(*values: str) -> AnyValue:
    return AnyValue(array_value=ArrayValue(values=[AnyValue(string_value=v) for v in values]))


def _post(setup: Setup, request: ExportTraceServiceRequest) -> None:
    response = httpx.post(
        f"{setup.collector.http}/v1/traces",
        content=request.SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"},
    )
    assert response.status_code == 200, response.text


def _only_span(request: ExportTraceServiceRequest) -> Span:
    return request.resource_spans[0].scope_spans[0].spans[0]


def _resource_and_scope(receiver: OTLPReceiver, span_id: bytes, trace_id: bytes) -> tuple[Any, Any]:
    for request in receiver.requests:
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    if span.span_id == span_id and span.trace_id == trace_id:
                        return resource_spans, scope_spans
    raise AssertionError("span not received")


def test_spans_not_evaluated_arrive_byte_identical(setup: Setup) -> None:
    trace_id = next(_trace_ids)
    request = exotic_request(trace_id, llm=False)
    _post(setup, request)
    [span] = setup.received(trace_id, 1)
    assert span.SerializeToString() == _only_span(request).SerializeToString()
    resource_spans, scope_spans = _resource_and_scope(setup.http_up, span.span_id, span.trace_id)
    sent = request.resource_spans[0]
    assert resource_spans.resource == sent.resource
    assert resource_spans.schema_url == sent.schema_url
    assert scope_spans.scope == sent.scope_spans[0].scope
    assert scope_spans.schema_url == sent.scope_spans[0].schema_url


def test_an_evaluated_span_differs_only_by_the_evaluation(setup: Setup) -> None:
    trace_id = next(_trace_ids)
    request = exotic_request(trace_id, llm=True)
    sent = _only_span(request)
    _post(setup, request)
    [span] = setup.received(trace_id, 1)
    values = attributes(span)
    assert values[semconv.EVAL_STATUS] == "ok"
    assert values[LABEL] == "factual"
    stripped = Span()
    stripped.CopyFrom(span)
    del stripped.attributes[len(sent.attributes) :]
    del stripped.events[len(sent.events) :]
    assert stripped.SerializeToString() == sent.SerializeToString()
    added = {kv.key for kv in span.attributes[len(sent.attributes) :]}
    assert added and all(k.startswith(("tracefact.", "evaluations.")) for k in added), added
    assert [e.name for e in span.events[len(sent.events) :]] == [semconv.GEN_AI_EVALUATION_EVENT]
    resource_spans, scope_spans = _resource_and_scope(setup.http_up, span.span_id, span.trace_id)
    assert resource_spans.resource == request.resource_spans[0].resource
    assert scope_spans.scope == request.resource_spans[0].scope_spans[0].scope


def test_spans_beside_llm_spans_arrive_as_sent_under_their_own_resource_and_scope(
    setup: Setup,
) -> None:
    """LLM spans anywhere in a request (alone in a scope, first, last) are held.

    Every other span goes on at once, byte-identical, under its own resource and scope.
    """
    trace_id = next(_trace_ids)
    layout = {  # service -> scope -> span kinds, in request order
        "first": {"web": ["http", "llm", "http", "llm", "http"], "llm-only": ["llm"]},
        "second": {"llm-first": ["llm", "db"], "plain": ["http"]},
    }
    request = ExportTraceServiceRequest()
    ids = itertools.count(0xF00)
    sent: dict[bytes, tuple[str, str, Span]] = {}
    for service, scopes in layout.items():
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.append(
            _kv("service.name", AnyValue(string_value=service))
        )
        for scope_name, kinds in scopes.items():
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.name = scope_name
            for kind in kinds:
                span = scope_spans.spans.add(
                    trace_id=trace_id.to_bytes(16, "big"),
                    span_id=next(ids).to_bytes(8, "big"),
                    parent_span_id=(0xA99).to_bytes(8, "big"),
                    name=kind,
                    start_time_unix_nano=1,
                    end_time_unix_nano=2,
                )
                if kind == "llm":
                    span.attributes.extend(
                        [
                            _kv("openinference.span.kind", AnyValue(string_value="LLM")),
                            _kv("input.value", AnyValue(string_value="How tall is it?")),
                            _kv("output.value", AnyValue(string_value="It is 330 metres tall.")),
                            _kv("tracefact.contexts", _strings(DOCUMENT)),
                        ]
                    )
                elif kind == "db":
                    span.attributes.append(_kv("db.system", AnyValue(string_value="postgresql")))
                sent[span.span_id] = (service, scope_name, span)
    _post(setup, request)
    received = setup.received(trace_id, len(sent))
    for span in received:
        service, scope_name, original = sent[span.span_id]
        where = _resource_and_scope(setup.http_up, span.span_id, span.trace_id)
        resource_spans, scope_spans = where
        [name] = [kv.value.string_value for kv in resource_spans.resource.attributes]
        assert name == service
        assert scope_spans.scope.name == scope_name
        if original.name == "llm":
            assert attributes(span)[semconv.EVAL_STATUS] == "ok"
        else:
            assert span.SerializeToString() == original.SerializeToString()


def test_spans_an_sdk_already_evaluated_pass_through_untouched(setup: Setup) -> None:
    trace_id = next(_trace_ids)
    request = exotic_request(trace_id, llm=True)
    sent = _only_span(request)
    sent.attributes.extend(
        [
            _kv(semconv.EVAL_STATUS, AnyValue(string_value="ok")),
            _kv(LABEL, AnyValue(string_value="hallucinated")),
        ]
    )
    _post(setup, request)
    [span] = setup.received(trace_id, 1)
    assert span.SerializeToString() == sent.SerializeToString()


def test_otlp_json_with_hex_ids_and_gzip(setup: Setup) -> None:
    import gzip
    import json

    trace_id = next(_trace_ids)
    document = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "j"}}]
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "json"},
                        "spans": [
                            {
                                "traceId": f"{trace_id:032x}",
                                "spanId": "00000000000000aa",
                                "name": "llm",
                                "kind": 3,
                                "startTimeUnixNano": "1",
                                "endTimeUnixNano": "2",
                                "attributes": [
                                    {
                                        "key": "openinference.span.kind",
                                        "value": {"stringValue": "LLM"},
                                    },
                                    {
                                        "key": "output.value",
                                        "value": {"stringValue": "It is 330 metres tall."},
                                    },
                                    {"key": "input.value", "value": {"stringValue": "How tall?"}},
                                    {"key": "llm.token_count.total", "value": {"intValue": "12"}},
                                ],
                                "unknownField": "ignored",
                            }
                        ],
                    }
                ],
            }
        ]
    }
    setup.send(retriever_span(trace_id))
    response = httpx.post(
        f"{setup.collector.http}/v1/traces",
        content=gzip.compress(json.dumps(document).encode()),
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    received = setup.received(trace_id, 2)
    [span] = [s for s in received if s.name == "llm"]
    values = attributes(span)
    assert span.span_id == bytes.fromhex("00000000000000aa")
    assert span.kind == Span.SPAN_KIND_CLIENT
    assert values["llm.token_count.total"] == 12
    assert values[LABEL] == "factual"


def test_ratio_sampling_agrees_with_the_sdks_trace_id_sampler(
    tmp_path: Path,
) -> None:
    """`sampler.ratio` decides on the trace id as OpenTelemetry's TraceIdRatioBased does."""
    trace_ids = [(i + 1) << 64 | (0x9E3779B97F4A7C15 * (i + 1)) % 2**64 for i in range(24)]
    with otlp_receiver() as upstream:
        config = base_config(upstream.endpoint, sampler={"ratio": 0.5}, window_seconds=0)
        with running_collector(tmp_path / "c.yaml", config) as collector:
            exporter = OTLPSpanExporter(endpoint=f"{collector.http}/v1/traces")
            spans = [s for t in trace_ids for s in fixture_spans("openinference-invented-plain", t)]
            assert exporter.export(spans) == SpanExportResult.SUCCESS
            assert upstream.wait_for(len(spans), 20)
    reference = TraceIdRatioBased(0.5)
    statuses = {
        int.from_bytes(s.trace_id, "big"): attributes(s)[semconv.EVAL_STATUS]
        for _, s in upstream.spans()
    }
    assert len(statuses) == len(trace_ids)
    for trace_id, status in statuses.items():
        sampled = reference.should_sample(None, trace_id, "x").decision.is_sampled()
        assert status == ("skipped" if sampled else "sampled_out"), hex(trace_id)
    assert set(statuses.values()) == {"skipped", "sampled_out"}


def test_an_llm_span_inside_an_llm_span_is_evaluated_once_on_the_outer_one(setup: Setup) -> None:
    """As the SDK does: the inner span is skipped as `nested`, naming the outer one."""
    from opentelemetry.trace import SpanContext, TraceFlags

    from tests.collector.harness import RESOURCE, SCOPE

    trace_id = next(_trace_ids)
    [inner] = fixture_spans("openinference-grounded-plain", trace_id)
    outer_id = 0x0A7E5
    inner = ReadableSpan(
        name=inner.name,
        context=inner.context,
        parent=SpanContext(trace_id, outer_id, False, TraceFlags(1)),
        resource=inner.resource,
        attributes=inner.attributes,
        events=inner.events,
        start_time=inner.start_time,
        end_time=inner.end_time,
        instrumentation_scope=inner.instrumentation_scope,
    )
    outer = ReadableSpan(
        name="answer",
        context=SpanContext(trace_id, outer_id, False, TraceFlags(1)),
        resource=RESOURCE,
        attributes={
            "openinference.span.kind": "LLM",
            "input.value": "How tall is the Eiffel Tower?",
            "output.value": "The Eiffel Tower is 330 metres tall and was completed in 1889.",
            "tracefact.contexts": (DOCUMENT,),
        },
        start_time=1,
        end_time=3,
        instrumentation_scope=SCOPE,
    )
    setup.send([inner])
    setup.send([outer])  # a later request, as the outer span ends later
    received = {s.name: attributes(s) for s in setup.received(trace_id, 2)}
    assert received["answer"][semconv.EVAL_STATUS] == "ok"
    assert received["answer"][LABEL] == "factual"
    nested = received[inner.name]
    assert nested[semconv.EVAL_STATUS] == "skipped"
    assert nested[semconv.EVAL_SKIP_REASON] == "nested"
    assert nested[semconv.EVAL_NESTED_IN] == f"{outer_id:016x}"


def test_a_root_that_arrives_before_its_llm_span_keeps_the_documents(setup: Setup) -> None:
    """The SDK forgets a trace's documents when its root ends; here the LLM span is later."""
    trace_id = next(_trace_ids)
    spans = fixture_spans("openllmetry_langchain-retriever-plain", trace_id)
    llm = [s for s in spans if span_role(s.attributes or {}) == "llm"]
    setup.send([s for s in spans if s not in llm])  # the retriever and the root
    setup.send(llm)
    received = setup.received(trace_id, len(spans))
    [span] = [s for s in received if span_role(attributes(s)) == "llm"]
    assert attributes(span)[semconv.CONTEXTS_SOURCE] == "retrieval"
    assert attributes(span)[LABEL] == "factual"


def _metric_sum(text: str, name: str) -> float:
    """The sum of a metric's samples over all its label sets, in Prometheus's text format."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


def test_the_live_rate_counts_what_the_collector_evaluates(setup: Setup) -> None:
    """The monitor of issue 20 runs in the collector: Σw and Σw·y on its /metrics."""
    metrics_url = f"{setup.collector.http}/metrics"
    weight, hallucinated = (
        "tracefact_monitor_weight_total",
        "tracefact_monitor_hallucinated_weight_total",
    )
    before = httpx.get(metrics_url).text
    invented = next(n for n in ANSWERS if "-invented-" in n)
    trace_id = next(_trace_ids)
    setup.send(retriever_span(trace_id) + fixture_spans(invented, trace_id))
    assert _wait(
        lambda: _metric_sum(httpx.get(metrics_url).text, weight) >= _metric_sum(before, weight) + 1
    )
    after = httpx.get(metrics_url).text
    assert _metric_sum(after, weight) == _metric_sum(before, weight) + 1  # sample rate 1: w = 1
    assert _metric_sum(after, hallucinated) == _metric_sum(before, hallucinated) + 1
    assert "tracefact_monitor_rate{" in after
