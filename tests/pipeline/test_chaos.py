"""Fault injection: every span accounted for, whatever happens around the pipeline.

Producers, uncooperative evaluators, failing and hanging exporters, flushes,
shutdowns, re-configures and forks, in any order. After every run each LLM span was
handed to the exporter exactly once with a status (`dropped` ones included) and
counted once in the `tracefact.eval.spans` metric, and every shutdown ended within
its deadline.

`TRACEFACT_CHAOS_EXAMPLES` sets how many runs (default: a quick round for `make test`;
`make chaos` runs a long one).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.pipeline.helpers import ScriptedEvaluator
from tracefact import semconv
from tracefact.pipeline import EvaluationProcessor, PipelineOptions, WrapperSpanProcessor
from tracefact.pipeline.core import STOP_SECONDS

STATUSES = {
    semconv.STATUS_OK,
    semconv.STATUS_SKIPPED,
    semconv.STATUS_SAMPLED_OUT,
    semconv.STATUS_DROPPED,
    semconv.STATUS_TIMEOUT,
    semconv.STATUS_ERROR,
    semconv.STATUS_SHUTDOWN,
}
RAISED = ["ValueError", "RecursionError", "SystemExit", "KeyboardInterrupt", "GeneratorExit"]
BEHAVIOURS = [
    "ok",
    "hallucinated",
    "slow:0.01",
    "slow:0.3",
    "hang",
    "error",
    "flaky:1",
    "garbage",
    "block",
    "swallow",
    "thread",
    *(f"raise:{name}" for name in [*RAISED, "CancelledError"]),
]
SHUTDOWN_SLACK = 5.0
"""Scheduling slack on a loaded machine: shutdown's own bound is drain + STOP_SECONDS."""


class ChaosExporter(SpanExporter):
    """Records every span handed to it, then succeeds, fails, raises or stalls on cue."""

    def __init__(self) -> None:
        self.received: list[ReadableSpan] = []
        self.mode = "ok"
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            self.received.extend(spans)
        if self.mode == "fail":
            return SpanExportResult.FAILURE
        if self.mode == "raise":
            raise ConnectionError("collector gone")
        if self.mode == "stall":
            time.sleep(0.05)
        return SpanExportResult.SUCCESS


options = st.builds(
    PipelineOptions,
    attach=st.sampled_from(["enrich", "span"]),
    queue_size=st.integers(1, 6),
    concurrency=st.integers(1, 3),
    timeout_seconds=st.sampled_from([0.05, 0.2]),
    max_retries=st.integers(0, 1),
    max_hold_seconds=st.sampled_from([0.02, 0.1, 2.0]),
    drain_seconds=st.sampled_from([0.0, 0.05, 0.2]),
)
spans = st.lists(
    st.tuples(st.sampled_from([*BEHAVIOURS, None]), st.booleans(), st.booleans()),
    min_size=1,
    max_size=6,
)


class Chaos(RuleBasedStateMachine):
    """One tracer provider; the processor behind its switch is replaced on re-configure."""

    def __init__(self) -> None:
        super().__init__()
        self.evaluator = ScriptedEvaluator()
        self.exporter = ChaosExporter()
        self.switch = WrapperSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()))
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.switch)
        self.tracer = self.provider.get_tracer("chaos")
        self.produced: list[int] = []
        self.after_shutdown: list[int] = []
        """Produced behind a processor already shut down: counted, exported nowhere."""
        self.processor: EvaluationProcessor | None = None
        self.closed = False
        self.shutdown_overruns: list[float] = []
        self.readers: list[InMemoryMetricReader] = []

    def _install(self, opts: PipelineOptions) -> None:
        reader = InMemoryMetricReader()
        self.readers.append(reader)
        meters = MeterProvider(metric_readers=[reader])
        new = EvaluationProcessor(
            SimpleSpanProcessor(self.exporter), [self.evaluator], opts, meter_provider=meters
        )
        old, self.switch.downstream = self.switch.downstream, new
        self._shutdown(old)
        self.processor, self.closed = new, False

    def _shutdown(self, processor: object) -> None:
        if not isinstance(processor, EvaluationProcessor):
            return
        began = time.monotonic()
        processor.shutdown()
        took = time.monotonic() - began
        if took > processor.options.drain_seconds + STOP_SECONDS + SHUTDOWN_SLACK:
            self.shutdown_overruns.append(took)

    def _span(self, output: str | None, contexts: bool, nested: bool) -> None:
        attributes = {
            semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_LLM,
            semconv.INPUT_VALUE: "[" * 3000 if nested else f"q{len(self.produced)}",
        }
        with self.tracer.start_as_current_span("llm", attributes=attributes) as span:
            if output is not None:
                span.set_attribute(semconv.OUTPUT_VALUE, output)
            if contexts:
                span.set_attribute(semconv.CONTEXTS, ["the context"])
            (self.after_shutdown if self.closed else self.produced).append(
                span.get_span_context().span_id
            )

    @rule(opts=options)
    def configure(self, opts: PipelineOptions) -> None:
        self._install(opts)

    @precondition(lambda self: self.processor is not None)
    @rule(batch=spans, threads=st.integers(1, 3))
    def produce(self, batch: list[tuple[str | None, bool, bool]], threads: int) -> None:
        workers = [
            threading.Thread(target=lambda: [self._span(*spec) for spec in batch])
            for _ in range(threads)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()

    @rule(mode=st.sampled_from(["ok", "fail", "raise", "stall"]))
    def exporter_mode(self, mode: str) -> None:
        self.exporter.mode = mode

    @precondition(lambda self: self.processor is not None)
    @rule(millis=st.sampled_from([0, 50, 500]))
    def flush(self, millis: int) -> None:
        assert self.processor is not None
        self.processor.force_flush(millis)

    @precondition(lambda self: self.processor is not None)
    @rule()
    def shutdown(self) -> None:
        self._shutdown(self.processor)  # later spans are counted with status `shutdown`
        self.closed = True

    @precondition(lambda self: self.processor is not None and hasattr(os, "fork"))
    @rule()
    def fork(self) -> None:
        """A forked child evaluates its own span; the parent's accounting is unaffected."""
        assert self.processor is not None
        if self.closed:
            return
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                child = InMemorySpanExporter()
                self.processor.downstream = SimpleSpanProcessor(child)
                with self.tracer.start_as_current_span("llm") as span:
                    span.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.KIND_LLM)
                    span.set_attribute(semconv.OUTPUT_VALUE, "ok")
                    span.set_attribute(semconv.CONTEXTS, ["c"])
                self.processor.force_flush(5000)
                exported = child.get_finished_spans()  # attach="span": status on the carrier
                statuses = [
                    s.attributes[semconv.EVAL_STATUS]
                    for s in exported
                    if s.attributes and semconv.EVAL_STATUS in s.attributes
                ]
                code = 0 if statuses and set(statuses) <= STATUSES else 2
            finally:
                os._exit(code)
        deadline = time.monotonic() + 30
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                raise AssertionError("forked child did not finish")
            time.sleep(0.01)
        assert os.WEXITSTATUS(status) == 0

    @invariant()
    def shutdowns_end_within_their_deadline(self) -> None:
        assert not self.shutdown_overruns, self.shutdown_overruns

    def teardown(self) -> None:
        try:
            self._shutdown(self.processor)
            self.provider.shutdown()
        finally:
            self.evaluator.gate.set()
        assert not self.shutdown_overruns, self.shutdown_overruns
        copies: dict[int, ReadableSpan] = {}
        carried: dict[int, list[str]] = {}
        for span in self.exporter.received:
            attributes = span.attributes or {}
            status = attributes.get(semconv.EVAL_STATUS)
            if attributes.get(semconv.OPENINFERENCE_SPAN_KIND) == semconv.KIND_EVALUATOR:
                assert status in STATUSES, status
                carried.setdefault(span.links[0].context.span_id, []).append(status)
                continue
            assert span.context is not None
            assert span.context.span_id not in copies, "a span was exported twice"
            copies[span.context.span_id] = span
        assert set(copies) == set(self.produced), "a span was lost"
        for span_id, span in copies.items():
            status = (span.attributes or {}).get(semconv.EVAL_STATUS)
            if status is None:  # attach="span": the span left at once, its status follows
                (status,) = carried[span_id]
            assert status in STATUSES, status
            assert len(carried.get(span_id, ())) <= 1, "two carriers for one span"
        total = len(self.produced) + len(self.after_shutdown)
        assert sum(counted(reader) for reader in self.readers) == total


def counted(reader: InMemoryMetricReader) -> int:
    """Spans one processor counted in `tracefact.eval.spans`, over every status."""
    data = reader.get_metrics_data()
    return sum(
        int(point.value)
        for resource in (data.resource_metrics if data else ())
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "tracefact.eval.spans"
        for point in metric.data.data_points  # type: ignore[union-attr]
    )


Chaos.TestCase.settings = settings(
    max_examples=int(os.environ.get("TRACEFACT_CHAOS_EXAMPLES", "20")),
    stateful_step_count=8,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # timing-dependent: no shrinking
    suppress_health_check=list(HealthCheck),
)
TestChaos = Chaos.TestCase
TestChaos.pytestmark = [pytest.mark.slow]  # type: ignore[attr-defined]
