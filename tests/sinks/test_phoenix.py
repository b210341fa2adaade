"""PhoenixAnnotations against a local server implementing Phoenix's annotation contract."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.trace import format_span_id

import tracefact
from tests.conftest import Spans
from tests.fakes.json_api import Scripted
from tests.fakes.phoenix_server import fake_phoenix
from tests.pipeline.helpers import Pipeline, evaluated_copies
from tests.sinks.conftest import SinkCounts
from tests.sinks.helpers import FAST, closed_port_url, evaluated
from tracefact.evaluators.lexical import LexicalOverlap
from tracefact.sinks import PhoenixAnnotations

SINK = "phoenix-annotations"


def test_each_result_becomes_an_annotation_on_the_span_it_judges(sink_counts: SinkCounts) -> None:
    with fake_phoenix() as phoenix:
        sink = PhoenixAnnotations(phoenix.base_url, meter_provider=sink_counts.provider, **FAST)
        pipeline = Pipeline(sinks=[sink])
        for i, output in enumerate(["ok", "hallucinated", "ok"]):
            pipeline.llm_span(output=output, question=f"q{i}")
        assert pipeline.flush()
        pipeline.close()

    exported = evaluated_copies(pipeline.exported())
    by_span = {a["span_id"]: a for a in phoenix.annotations}
    assert set(by_span) == {format_span_id(s.context.span_id) for s in exported}
    for span in exported:
        annotation = by_span[format_span_id(span.context.span_id)]
        attributes = span.attributes
        assert annotation["name"] == "hallucination"
        assert annotation["annotator_kind"] == "CODE"
        assert annotation["result"] == {
            "label": attributes["tracefact.eval.hallucination.label"],
            "score": attributes["tracefact.eval.hallucination.score"],
            "explanation": attributes["tracefact.eval.hallucination.explanation"],
        }
        assert annotation["metadata"]["evaluator"] == "scripted/hallucination"
        assert annotation["identifier"] == "tracefact"
    assert sink_counts() == {(SINK, "delivered"): 3}


def test_configure_hands_results_to_sinks(spans: Spans) -> None:
    with fake_phoenix() as phoenix:
        sink = PhoenixAnnotations(phoenix.base_url, **FAST)
        spans.reconfigure(evaluators=[LexicalOverlap()], sinks=[sink])

        @tracefact.llm
        def answer(question: str, contexts: list[str]) -> str:
            return "Paris is the capital of France."

        answer("What is the capital of France?", ["Paris is the capital of France."])
        (span,) = spans.all()  # flushes the sinks too
        (annotation,) = phoenix.annotations
    assert annotation["span_id"] == format_span_id(span.context.span_id)
    label = span.attributes[f"tracefact.eval.{annotation['name']}.label"]
    assert annotation["result"]["label"] == label


def test_results_travel_in_batches() -> None:
    with fake_phoenix() as phoenix:
        sink = PhoenixAnnotations(phoenix.base_url, max_batch_size=2, schedule_delay_seconds=60)
        for _ in range(5):
            sink.submit(evaluated())
        assert sink.force_flush(5000)
        sink.shutdown()
    assert [len(r.body["data"]) for r in phoenix.api.requests] == [2, 2, 1]
    assert len(phoenix.annotations) == 5


def test_api_key_is_sent_as_bearer_token_and_a_refusal_is_counted(
    sink_counts: SinkCounts, caplog: pytest.LogCaptureFixture
) -> None:
    with fake_phoenix(api_key="s3cret") as phoenix:
        good = PhoenixAnnotations(phoenix.base_url, api_key="s3cret", **FAST)
        bad = PhoenixAnnotations(phoenix.base_url, meter_provider=sink_counts.provider, **FAST)
        good.submit(evaluated())
        bad.submit(evaluated())
        with caplog.at_level(logging.WARNING, logger="tracefact"):
            assert good.force_flush(5000) and bad.force_flush(5000)
        good.shutdown()
        bad.shutdown()
    assert len(phoenix.annotations) == 1
    assert len(phoenix.api.requests) == 2  # a 401 is final: not retried
    assert sink_counts() == {(SINK, "failed"): 1}
    assert "HTTP 401" in caplog.text


def test_transient_failures_are_retried(sink_counts: SinkCounts) -> None:
    with fake_phoenix() as phoenix:
        phoenix.api.script = [Scripted(503), Scripted(429, headers={"Retry-After": "0"})]
        sink = PhoenixAnnotations(phoenix.base_url, meter_provider=sink_counts.provider, **FAST)
        sink.submit(evaluated())
        assert sink.force_flush(5000)
        sink.shutdown()
    assert len(phoenix.api.requests) == 3
    assert len(phoenix.annotations) == 1
    assert sink_counts() == {(SINK, "delivered"): 1}


def test_an_unreachable_phoenix_never_holds_up_or_loses_a_span(
    sink_counts: SinkCounts, caplog: pytest.LogCaptureFixture
) -> None:
    sink = PhoenixAnnotations(
        closed_port_url(), max_retries=2, meter_provider=sink_counts.provider, **FAST
    )
    pipeline = Pipeline(sinks=[sink])
    with caplog.at_level(logging.WARNING, logger="tracefact"):
        for i in range(4):
            pipeline.llm_span(output="hallucinated", question=f"q{i}")
        pipeline.flush()
        pipeline.close()
    exported = evaluated_copies(pipeline.exported())
    assert len(exported) == 4
    assert all(s.attributes["tracefact.eval.status"] == "ok" for s in exported)
    assert sink_counts() == {(SINK, "failed"): 4}
    assert "ConnectError" in caplog.text
