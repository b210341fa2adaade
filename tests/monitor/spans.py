"""Writing spans files for the report and monitor tests, through the real file exporter."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Tracer

from tracefact import semconv
from tracefact.spans_file import SpanFileExporter


def evaluated(
    label: str | None,
    *,
    rate: float = 1.0,
    model: str = "m1",
    status: str = "ok",
    score: float | None = None,
    question: str = "Where is the Eiffel Tower?",
    answer: str = "In Paris.",
) -> dict[str, Any]:
    """An LLM span's attributes as the pipeline exports them, judged by `hallucination`."""
    attributes: dict[str, Any] = {
        semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_LLM,
        semconv.LLM_MODEL_NAME: model,
        semconv.INPUT_VALUE: question,
        semconv.OUTPUT_VALUE: answer,
        semconv.CONTEXTS: ["The Eiffel Tower is in Paris."],
        semconv.EVAL_STATUS: status,
        semconv.EVAL_SAMPLE_RATE: rate,
        semconv.EVAL_LATENCY_MS: 12.0,
    }
    if label is not None:
        name = "hallucination"
        attributes[semconv.eval_attribute(name, "status")] = "ok"
        attributes[semconv.eval_attribute(name, "label")] = label
        attributes[semconv.eval_attribute(name, "score")] = (
            score if score is not None else (0.9 if label == "hallucinated" else 0.1)
        )
        attributes[semconv.eval_attribute(name, "explanation")] = f"judged {label}"
    return attributes


class SpanWriter:
    """Ends spans with given attributes and times into a spans file."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def span(self, name: str, attributes: dict[str, Any], at: float) -> None:
        """A span ending at Unix time `at` (seconds)."""
        start = int((at - 0.5) * 1e9)
        span = self.tracer.start_span(name, attributes=attributes, start_time=start)
        span.end(end_time=int(at * 1e9))


@contextmanager
def spans_file(path: Path, service: str = "report-test") -> Iterator[SpanWriter]:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(SpanFileExporter(path)))
    try:
        yield SpanWriter(provider.get_tracer("tests"))
    finally:
        provider.shutdown()
