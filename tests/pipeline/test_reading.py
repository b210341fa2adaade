"""The processor reads LLM spans of any convention.

Contexts from grounding and retriever spans, skip reasons, nested spans, and their metrics.
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan

import tracefact
from tests.pipeline.helpers import Pipeline, ScriptedEvaluator
from tracefact import semconv
from tracefact.conventions import DocumentStore, ReadOptions
from tracefact.pipeline.reading import SpanReader


def genai_attributes(answer: str) -> dict[str, Any]:
    """An LLM span as the OpenTelemetry GenAI instrumentors write it."""
    return {
        semconv.GEN_AI_OPERATION_NAME: "chat",
        semconv.GEN_AI_INPUT_MESSAGES: json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "q?"}]}]
        ),
        semconv.GEN_AI_OUTPUT_MESSAGES: json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
        ),
    }


def by_name(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    [span] = [s for s in spans if s.name == name]
    return span


def metric_points(reader: InMemoryMetricReader) -> dict[str, Any]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        metric.name: metric.data.data_points
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
    }


def test_grounding_gives_contexts_to_an_llm_span_of_another_instrumentation() -> None:
    with Pipeline() as p:
        documents = ["the sky is blue", {"page_content": "grass is green"}]
        with (
            tracefact.grounding(documents),
            p.tracer.start_as_current_span("chat", attributes=genai_attributes("ok")),
        ):
            pass
        with p.tracer.start_as_current_span("outside", attributes=genai_attributes("ok")):
            pass
        assert p.flush()
        inside, outside = by_name(p.exported(), "chat"), by_name(p.exported(), "outside")
        assert inside.attributes[semconv.EVAL_STATUS] == "ok"
        assert inside.attributes[semconv.CONTEXTS] == ("the sky is blue", "grass is green")
        assert inside.attributes[semconv.CONTEXTS_SOURCE] == "grounding"
        assert outside.attributes[semconv.EVAL_STATUS] == "skipped"
        assert outside.attributes[semconv.EVAL_SKIP_REASON] == "no_contexts"


def test_an_openinference_retriever_span_grounds_later_llm_spans_of_its_trace_only() -> None:
    p = Pipeline()
    retriever = {
        semconv.OPENINFERENCE_SPAN_KIND: "RETRIEVER",
        "retrieval.documents.0.document.content": "doc one",
        "retrieval.documents.1.document.content": "doc two",
    }
    try:
        with p.tracer.start_as_current_span("request"):
            with p.tracer.start_as_current_span("retrieve", attributes=retriever):
                pass
            with p.tracer.start_as_current_span("chat", attributes=genai_attributes("ok")):
                pass
        with p.tracer.start_as_current_span("later", attributes=genai_attributes("ok")):
            pass
        assert p.flush()
        chat = by_name(p.exported(), "chat")
        assert chat.attributes[semconv.CONTEXTS] == ("doc one", "doc two")
        assert chat.attributes[semconv.CONTEXTS_SOURCE] == "retrieval"
        assert chat.attributes[semconv.EVAL_STATUS] == "ok"
        later = by_name(p.exported(), "later")
        assert later.attributes[semconv.EVAL_SKIP_REASON] == "no_contexts"
        assert len(p.processor.reader.store) == 0  # the root ended: the trace is forgotten
    finally:
        p.close()


def test_an_llm_span_inside_a_live_llm_span_is_skipped_as_nested() -> None:
    with Pipeline() as p:
        with p.tracer.start_as_current_span("outer", attributes=genai_attributes("ok")) as outer:
            outer.set_attribute(semconv.CONTEXTS, ["ctx"])
            with p.tracer.start_as_current_span("inner", attributes=genai_attributes("ok")):
                pass
        assert p.flush()
        exported = p.exported()
        inner, evaluated = by_name(exported, "inner"), by_name(exported, "outer")
        assert inner.attributes[semconv.EVAL_STATUS] == "skipped"
        assert inner.attributes[semconv.EVAL_SKIP_REASON] == "nested"
        assert (
            inner.attributes[semconv.EVAL_NESTED_IN] == f"{outer.get_span_context().span_id:016x}"
        )
        assert evaluated.attributes[semconv.EVAL_STATUS] == "ok"
        assert p.evaluators[0].calls == 1


def test_prompt_contexts_only_when_switched_on() -> None:
    attributes = {
        semconv.OPENINFERENCE_SPAN_KIND: "LLM",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "Document: the sky is blue.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": "What colour is the sky?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "hallucinated",
    }
    for switched_on, status in ((False, "skipped"), (True, "ok")):
        with Pipeline(reader=SpanReader(ReadOptions(contexts_from_prompt=switched_on))) as p:
            with p.tracer.start_as_current_span("chat", attributes=attributes):
                pass
            assert p.flush()
            [span] = p.exported()
            assert span.attributes[semconv.EVAL_STATUS] == status
            if switched_on:
                assert span.attributes[semconv.CONTEXTS_SOURCE] == "prompt"
                assert span.attributes[semconv.CONTEXTS] == ("Document: the sky is blue.",)
                assert span.attributes["tracefact.eval.hallucination.label"] == "hallucinated"


def test_skip_reasons_and_evictions_are_counted_in_metrics() -> None:
    reader = InMemoryMetricReader()
    store = DocumentStore(max_traces=1)
    p = Pipeline(
        [ScriptedEvaluator()],
        meter_provider=MeterProvider(metric_readers=[reader]),
        reader=SpanReader(store=store),
    )
    retriever = {
        semconv.OPENINFERENCE_SPAN_KIND: "RETRIEVER",
        "retrieval.documents.0.document.content": "doc",
    }
    try:
        p.llm_span(contexts=None)
        p.llm_span(output=None)
        p.llm_span(output=None, **{semconv.OUTPUT_LENGTH: 3})
        for _ in range(3):  # three traces whose roots stay open: the store keeps one
            root = p.tracer.start_span("root", context=Context())
            inside = trace.set_span_in_context(root)
            p.tracer.start_span("r", context=inside, attributes=retriever).end()
        assert p.flush()
        points = metric_points(reader)
        skipped = {dp.attributes["reason"]: dp.value for dp in points["tracefact.eval.skipped"]}
        assert skipped == {"no_contexts": 1, "no_answer": 1, "capture_off": 1}
        evicted = {dp.attributes["reason"]: dp.value for dp in points["tracefact.contexts.evicted"]}
        assert evicted == {"traces": 2}
    finally:
        p.close()
