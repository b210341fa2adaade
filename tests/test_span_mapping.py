"""`configure(span_mapping=..., contexts_from_prompt=...)` through the public API."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracefact
from tests.conftest import reset_global_tracer_provider
from tracefact import semconv
from tracefact.evaluators.lexical import LexicalOverlap


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    reset_global_tracer_provider()
    yield InMemorySpanExporter()
    tracefact.shutdown()
    reset_global_tracer_provider()


def test_a_declarative_mapping_reads_an_app_specific_span(exporter: InMemorySpanExporter) -> None:
    tracefact.configure(
        exporter=exporter,
        evaluators=[LexicalOverlap()],
        span_mapping={"answer": "app.reply", "contexts": "app.request#documents.*.text"},
    )
    request = json.dumps({"documents": [{"text": "Paris is the capital of France."}]})
    attributes = {semconv.GEN_AI_OPERATION_NAME: "chat", "app.request": request}
    tracer = trace.get_tracer("app")
    for reply in ("Paris is the capital of France.", "Lyon is the capital of Spain."):
        with tracer.start_as_current_span("chat", attributes=attributes) as span:
            span.set_attribute("app.reply", reply)
    assert tracefact.force_flush(10_000)
    spans = exporter.get_finished_spans()
    assert [s.attributes[semconv.CONTEXTS_SOURCE] for s in spans] == ["mapping", "mapping"]
    labels = {
        s.attributes["app.reply"]: s.attributes["tracefact.eval.hallucination.label"] for s in spans
    }
    assert labels == {
        "Paris is the capital of France.": "factual",
        "Lyon is the capital of Spain.": "hallucinated",
    }


def test_a_bad_mapping_is_refused_by_configure(exporter: InMemorySpanExporter) -> None:
    with pytest.raises(ValueError, match="span_mapping"):
        tracefact.configure(exporter=exporter, span_mapping={"answers": "x"})
