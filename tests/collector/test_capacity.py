"""The collector samples by what its evaluator can take: the excess is `sampled_out` at once.

An in-process collector, evaluation room for one span, and an evaluator that ends a
round's evaluations only when the test opens that round: every round sends more LLM
spans than the evaluator takes. Spans are read back from a fake OTLP upstream.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.collector import evaluators
from tests.collector.harness import attributes, base_config
from tests.fakes.otlp import OTLPReceiver, otlp_receiver
from tracefact import semconv
from tracefact.collector.config import CollectorConfig
from tracefact.collector.service import Collector
from tracefact.collector.spans import extend

ROUNDS = 150
PER_ROUND = 4
TRUE_RATE = 0.3


@pytest.fixture
def upstream() -> Iterator[OTLPReceiver]:
    with otlp_receiver() as receiver:
        yield receiver


def llm_span(index: int, round_index: int, hallucinated: bool, **extra: str) -> Span:
    label = "hallucinated" if hallucinated else "factual"
    span = Span(
        trace_id=(0x30B << 64 | index).to_bytes(16, "big"),
        span_id=(index + 1).to_bytes(8, "big"),
        name="llm",
        start_time_unix_nano=1,
        end_time_unix_nano=2,
    )
    extend(
        span.attributes,
        {
            semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_LLM,
            semconv.INPUT_VALUE: "What is the capital of France?",
            semconv.CONTEXTS: ["Paris is the capital of France."],
            semconv.OUTPUT_VALUE: f"round {round_index}: {label}",
            **extra,
        },
    )
    return span


def post(ports: dict[str, int], spans: list[Span]) -> None:
    response = httpx.post(
        f"http://127.0.0.1:{ports['http']}/v1/traces",
        content=request(spans),
        headers={"Content-Type": "application/x-protobuf"},
    )
    assert response.status_code == 200


def request(spans: list[Span]) -> bytes:
    body = ExportTraceServiceRequest()
    body.resource_spans.add().scope_spans.add().spans.extend(spans)
    encoded: bytes = body.SerializeToString()
    return encoded


def test_beyond_capacity_spans_are_sampled_out_forwarded_and_the_weighted_rate_unbiased(
    upstream: OTLPReceiver,
) -> None:
    labels = random.Random(30).choices([True, False], [TRUE_RATE, 1 - TRUE_RATE], k=ROUNDS * 4)
    settings = base_config(
        upstream.endpoint,
        evaluators=[{"import": "tests.collector.evaluators:gated"}],
        queue_size=1,
        window_seconds=0,
    )
    service = Collector(CollectorConfig.model_validate(settings))
    ports = service.start()
    try:
        for round_index in range(ROUNDS):
            first = round_index * PER_ROUND
            spans = [llm_span(i, round_index, labels[i]) for i in range(first, first + PER_ROUND)]
            post(ports, spans)
            evaluators.open_round(round_index)  # what was admitted this round may finish
            assert upstream.wait_for(first + PER_ROUND), f"round {round_index} not forwarded"
    finally:
        service.shutdown()

    received = [attributes(span) for _, span in upstream.spans()]
    assert len(received) == ROUNDS * PER_ROUND  # every span forwarded, once
    assert len({span.span_id for _, span in upstream.spans()}) == ROUNDS * PER_ROUND
    statuses = Counter(a[semconv.EVAL_STATUS] for a in received)
    assert set(statuses) == {semconv.STATUS_OK, semconv.STATUS_SAMPLED_OUT}, statuses
    assert statuses[semconv.STATUS_SAMPLED_OUT] >= ROUNDS * PER_ROUND / 2, statuses

    evaluated = [a for a in received if a[semconv.EVAL_STATUS] == semconv.STATUS_OK]
    weights = [1.0 / a[semconv.EVAL_SAMPLE_RATE] for a in evaluated]
    # Weighted by the rate actually applied, the evaluated spans stand for all of them...
    assert sum(weights) == pytest.approx(ROUNDS * PER_ROUND, rel=0.15)
    # ...and the weighted hallucination rate is the true one (labels drawn at TRUE_RATE).
    true_rate = sum(labels) / len(labels)
    hallucinated = [a["tracefact.eval.hallucination.label"] == "hallucinated" for a in evaluated]
    weighted = sum(w for w, h in zip(weights, hallucinated, strict=True) if h) / sum(weights)
    assert weighted == pytest.approx(true_rate, abs=0.1), (weighted, true_rate, len(evaluated))


def test_a_rule_on_attributes_still_samples_with_room_to_spare(upstream: OTLPReceiver) -> None:
    """The bounded sampler reads attributes when the configured one asks for them."""
    settings = base_config(
        upstream.endpoint,
        sampler={"ratio": 0.0, "rules": [{"match": {"tier": "gold"}, "ratio": 1.0}]},
        window_seconds=0,
    )
    service = Collector(CollectorConfig.model_validate(settings))
    ports = service.start()
    try:
        post(ports, [llm_span(i, 0, False, tier="gold" if i % 2 else "free") for i in range(4)])
        assert upstream.wait_for(4)
    finally:
        service.shutdown()
    by_tier = {
        (a["tier"], a[semconv.EVAL_STATUS], a.get(semconv.EVAL_SAMPLE_RATE))
        for a in (attributes(span) for _, span in upstream.spans())
    }
    assert by_tier == {("gold", semconv.STATUS_OK, 1.0), ("free", semconv.STATUS_SAMPLED_OUT, None)}
