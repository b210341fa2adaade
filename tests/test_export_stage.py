"""The export stage and metrics across re-configures: every span exported or counted."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision as SamplingDecision
from opentelemetry.sdk.trace.sampling import Sampler, SamplingResult

import tracefact
from tests.conftest import reset_global_tracer_provider
from tests.pipeline.helpers import ScriptedEvaluator
from tests.sinks.helpers import closed_port_url
from tracefact import semconv
from tracefact.export import ExportProcessor


class Metrics:
    """Sums of tracefact's metrics by name and one attribute, as a backend would read them."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])

    def by(self, name: str, attribute: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in (m for m in scope.metrics if m.name == name):
                    for point in metric.data.data_points:  # type: ignore[union-attr]
                        key = str(point.attributes.get(attribute))  # type: ignore[union-attr]
                        counts[key] = counts.get(key, 0) + int(point.value)  # type: ignore[union-attr]
        return counts

    def export_dropped(self) -> int:
        return sum(self.by(semconv.METRIC_EXPORT_DROPPED, "reason").values())


class Blocking(SpanExporter):
    """Holds every export until `release` (forever if never released)."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.released.wait()
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


class Slow(InMemorySpanExporter):
    """Takes a while over each batch, so producers can outrun it."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        time.sleep(0.2)
        return super().export(spans)


@pytest.fixture
def metrics() -> Iterator[Metrics]:
    reset_global_tracer_provider()
    found = Metrics()
    yield found
    tracefact.shutdown()
    reset_global_tracer_provider()
    found.provider.shutdown()


def produce(count: int, llm: bool = False) -> None:
    tracer = trace.get_tracer("tests")
    attributes = {semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_LLM} if llm else {}
    for _ in range(count):
        with tracer.start_as_current_span("work", attributes=attributes) as span:
            span.set_attribute(semconv.OUTPUT_VALUE, "ok")


def in_thread(call: Callable[[], bool]) -> bool | None:
    """`call()`'s answer, or None if it has not answered within a generous 60 s."""
    answers: list[bool] = []
    thread = threading.Thread(target=lambda: answers.append(call()), daemon=True)
    thread.start()
    thread.join(60)
    return answers[0] if answers else None


@pytest.mark.parametrize("source", ["argument", "environment"])
def test_export_queue_size_is_an_option_and_its_drops_are_counted(
    metrics: Metrics, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter = Blocking()
    options = {"export_queue_size": 10} if source == "argument" else {}
    if source == "environment":
        monkeypatch.setenv("TRACEFACT_EXPORT_QUEUE_SIZE", "10")
    tracefact.configure(
        exporter=exporter, evaluators=[], meter_provider=metrics.provider, **options
    )
    produce(100)
    exporter.released.set()
    assert not tracefact.force_flush(10_000)  # some were lost, and flush says so
    dropped = metrics.by(semconv.METRIC_EXPORT_DROPPED, "reason")
    assert dropped[semconv.EXPORT_DROP_QUEUE_FULL] > 0
    assert len(exporter.spans) + metrics.export_dropped() == 100
    produce(5)
    assert tracefact.force_flush(10_000)  # nothing lost since the last answer
    assert len(exporter.spans) + metrics.export_dropped() == 105


def test_force_flush_returns_false_in_time_when_the_exporter_hangs(metrics: Metrics) -> None:
    exporter = Blocking()
    tracefact.configure(
        exporter=exporter,
        evaluators=[],
        export_timeout_seconds=0.5,
        meter_provider=metrics.provider,
    )
    try:
        produce(3)
        assert in_thread(lambda: tracefact.force_flush(2000)) is False
        assert in_thread(lambda: tracefact.shutdown() or True)  # shutdown keeps its timeout
        assert metrics.by(semconv.METRIC_EXPORT_DROPPED, "reason") == {"shutdown": 3}
    finally:
        exporter.released.set()


def test_force_flush_is_false_when_the_otlp_endpoint_is_down(metrics: Metrics) -> None:
    tracefact.configure(
        exporter="otlp",
        endpoint=closed_port_url(),
        evaluators=[],
        export_timeout_seconds=1,
        meter_provider=metrics.provider,
    )
    produce(2)
    assert in_thread(lambda: tracefact.force_flush(5000)) is False
    tracefact.shutdown()
    assert metrics.by(semconv.METRIC_EXPORT_DROPPED, "reason") == {"export_failed": 2}


@pytest.mark.slow
def test_reconfigure_under_load_exports_or_counts_every_span(metrics: Metrics) -> None:
    exporters = [Slow()]
    tracefact.configure(exporter=exporters[0], evaluators=[], meter_provider=metrics.provider)
    stop = threading.Event()
    produced = [0] * 4

    def producer(index: int) -> None:
        while not stop.is_set():
            produce(1)
            produced[index] += 1

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for _ in range(5):
        while sum(produced) < 2000 * len(exporters):
            stop.wait(0.01)
        exporters.append(Slow())
        tracefact.configure(exporter=exporters[-1], evaluators=[], meter_provider=metrics.provider)
    stop.set()
    for thread in threads:
        thread.join()
    tracefact.shutdown()
    exported = sum(len(e.get_finished_spans()) for e in exporters)
    assert exported + metrics.export_dropped() == sum(produced)


def test_pipeline_metrics_count_across_configures(metrics: Metrics) -> None:
    for count in (1, 10, 100):
        tracefact.configure(
            exporter=InMemorySpanExporter(),
            evaluators=[ScriptedEvaluator()],
            meter_provider=metrics.provider,
        )
        produce(count, llm=True)
        assert tracefact.force_flush(10_000)
    assert sum(metrics.by(semconv.METRIC_EVAL_SPANS, "status").values()) == 111


class RecordOnly(Sampler):
    """Records every span without sampling it (the SDK's RECORD_ONLY decision)."""

    def should_sample(self, *args: object, **kwargs: object) -> SamplingResult:
        return SamplingResult(SamplingDecision.RECORD_ONLY)

    def get_description(self) -> str:
        return "RecordOnly"


def test_only_sampled_spans_are_exported() -> None:
    exporter = InMemorySpanExporter()
    stage = ExportProcessor(exporter)
    recorded = TracerProvider(sampler=RecordOnly())
    recorded.add_span_processor(stage)
    sampled = TracerProvider()
    sampled.add_span_processor(stage)
    recorded.get_tracer("t").start_span("recorded only").end()
    sampled.get_tracer("t").start_span("sampled").end()
    stage.on_end(ReadableSpan(name="no context"))  # not the SDK's live span, no context
    assert stage.force_flush()
    assert [span.name for span in exporter.get_finished_spans()] == ["sampled"]
    stage.shutdown()
