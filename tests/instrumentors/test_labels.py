"""Each real instrumentor's LLM spans end with the right labels.

Grounded and invented, plain and streaming: tracefact reads them with no change to the
app but one `grounding` block (or a retriever span in the trace).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracefact
from tests.conftest import reset_global_tracer_provider
from tests.fakes.instrumentors import DOCUMENT, INSTRUMENTORS, SCENARIOS, run_scenario
from tracefact import semconv
from tracefact.conventions import span_role
from tracefact.evaluators.lexical import LexicalOverlap
from tracefact.pipeline import EvaluationProcessor

SCENARIO = {s.name: s for s in SCENARIOS}
LABEL = "tracefact.eval.hallucination.label"
LIVE = sorted(n for n, i in INSTRUMENTORS.items() if not i.pinned)
"""The instrumentors of the `instrumentors` extra; older pinned releases live in fixtures."""


class Traced:
    def __init__(self, evaluators: Sequence[Any]) -> None:
        self.exporter = InMemorySpanExporter()
        self.processor = EvaluationProcessor(SimpleSpanProcessor(self.exporter), evaluators)
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.processor)

    def llm_spans(self) -> list[ReadableSpan]:
        assert self.processor.force_flush(60_000)
        spans = self.exporter.get_finished_spans()
        return [s for s in spans if span_role(s.attributes or {}) == "llm"]


@pytest.fixture
def instrumented(name: str) -> Iterator[tuple[str, Traced, Any]]:
    traced = Traced([LexicalOverlap()])
    with INSTRUMENTORS[name].active(traced.provider) as server:
        yield name, traced, server
    traced.provider.shutdown()


@pytest.mark.parametrize("name", LIVE)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_grounded_and_invented_answers_get_the_right_labels(
    instrumented: tuple[str, Traced, Any], stream: bool
) -> None:
    name, traced, server = instrumented
    for scenario in ("grounded", "invented"):
        with tracefact.grounding([DOCUMENT]):
            answer = run_scenario(name, SCENARIO[scenario], stream, server)
        assert answer == SCENARIO[scenario].answer
    grounded, invented = traced.llm_spans()
    for span in (grounded, invented):
        assert span.attributes[semconv.EVAL_STATUS] == "ok", dict(span.attributes)
        assert span.attributes[semconv.CONTEXTS_SOURCE] == "grounding"
    assert grounded.attributes[LABEL] == "factual"
    assert invented.attributes[LABEL] == "hallucinated"


@pytest.mark.parametrize("name", LIVE)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_without_contexts_a_span_says_why_it_was_skipped(
    instrumented: tuple[str, Traced, Any], stream: bool
) -> None:
    name, traced, server = instrumented
    run_scenario(name, SCENARIO["grounded"], stream, server)
    [span] = traced.llm_spans()
    assert span.attributes[semconv.EVAL_STATUS] == "skipped"
    assert span.attributes[semconv.EVAL_SKIP_REASON] == "no_contexts"


@pytest.mark.parametrize("name", ["langchain"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_langchain_retriever_span_grounds_the_chat_model_span(name: str, stream: bool) -> None:
    traced = Traced([LexicalOverlap()])
    with INSTRUMENTORS["langchain"].active(traced.provider) as server:
        run_scenario("langchain", SCENARIO["retriever"], stream, server)
    [span] = traced.llm_spans()
    assert span.attributes[semconv.CONTEXTS_SOURCE] == "retrieval"
    assert span.attributes[semconv.CONTEXTS] == (DOCUMENT,)
    assert span.attributes[LABEL] == "factual"


@pytest.mark.parametrize("name", ["openinference"])
def test_an_instrumented_call_inside_an_app_llm_span_is_evaluated_once(name: str) -> None:
    traced = Traced([LexicalOverlap()])
    with INSTRUMENTORS["openinference"].active(traced.provider) as server:
        tracer = traced.provider.get_tracer("app")
        attributes = {semconv.OPENINFERENCE_SPAN_KIND: "LLM"}
        with tracer.start_as_current_span("app.answer", attributes=attributes) as outer:
            answer = run_scenario("openinference", SCENARIO["grounded"], False, server)
            outer.set_attributes({semconv.OUTPUT_VALUE: answer, semconv.CONTEXTS: [DOCUMENT]})
    inner, evaluated = traced.llm_spans()
    assert inner.attributes[semconv.EVAL_SKIP_REASON] == "nested"
    assert inner.attributes[semconv.EVAL_NESTED_IN] == f"{outer.get_span_context().span_id:016x}"
    assert evaluated.attributes[LABEL] == "factual"


@pytest.mark.parametrize("name", ["openinference", "openai_v2"])
def test_one_configure_call_and_the_default_evaluator(name: str) -> None:
    """One `configure` call and the default (local) evaluator label an app's spans.

    The app is instrumented only with OpenInference, or only with the GenAI instrumentor.
    """
    reset_global_tracer_provider()
    exporter = InMemorySpanExporter()
    provider = tracefact.configure(exporter=exporter)
    try:
        with INSTRUMENTORS[name].active(provider) as server:
            for scenario in ("grounded", "invented"):
                with tracefact.grounding([DOCUMENT]):
                    run_scenario(name, SCENARIO[scenario], False, server)
        assert tracefact.force_flush(120_000)
        spans = [s for s in exporter.get_finished_spans() if span_role(s.attributes or {})]
        labels = {s.attributes[LABEL] for s in spans}  # evaluated in either order
        assert len(spans) == 2 and labels == {"factual", "hallucinated"}
        for span in spans:
            invented = "1925" in str(span.attributes.get(semconv.OUTPUT_VALUE, ""))
            invented |= "1925" in str(span.attributes.get(semconv.GEN_AI_OUTPUT_MESSAGES, ""))
            assert span.attributes[LABEL] == ("hallucinated" if invented else "factual")
    finally:
        tracefact.shutdown()
        reset_global_tracer_provider()
