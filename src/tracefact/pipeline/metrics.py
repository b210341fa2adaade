"""The pipeline's accounting as OpenTelemetry metrics.

Every LLM span that enters is counted once in `tracefact.eval.spans` under its final
status, so `sum(by status) == LLM spans seen` is checkable from any metrics backend.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from tracefact import semconv
from tracefact._version import __version__
from tracefact.pipeline.enrich import Outcome


class PipelineMetrics:
    def __init__(
        self,
        queue_depth: Callable[[], int],
        meter_provider: MeterProvider | None = None,
        evictions: Callable[[], Mapping[str, int]] | None = None,
    ) -> None:
        meter = (meter_provider or metrics.get_meter_provider()).get_meter("tracefact", __version__)
        # Span statuses are counted on application threads: a locked dict increment,
        # read by observable counters, costs far less there than a synchronous Counter.add.
        self._span_counts: Counter[str] = Counter()
        self._skip_counts: Counter[str] = Counter()
        self._counts_lock = threading.Lock()
        self._evaluations = meter.create_counter(
            "tracefact.evaluations",
            unit="{evaluation}",
            description="evaluations by evaluator, label and status",
        )
        self._score = meter.create_histogram(
            "tracefact.eval.score", description="hallucination score (1 = hallucinated)"
        )
        self._duration = meter.create_histogram(
            "tracefact.eval.duration", unit="ms", description="evaluation latency"
        )
        self._cost = meter.create_counter(
            "tracefact.eval.cost", unit="USD", description="evaluation spend"
        )

        def observe_spans(options: CallbackOptions) -> Iterable[Observation]:
            with self._counts_lock:
                counts = dict(self._span_counts)
            return [Observation(n, {"status": status}) for status, n in counts.items()]

        def observe_dropped(options: CallbackOptions) -> Iterable[Observation]:
            with self._counts_lock:
                return [Observation(self._span_counts["dropped"])]

        meter.create_observable_counter(
            "tracefact.eval.spans",
            callbacks=[observe_spans],
            unit="{span}",
            description="LLM spans by evaluation status",
        )
        meter.create_observable_counter(
            "tracefact.eval.dropped",
            callbacks=[observe_dropped],
            unit="{span}",
            description="spans not evaluated: queue full",
        )

        def observe_skipped(options: CallbackOptions) -> Iterable[Observation]:
            with self._counts_lock:
                counts = dict(self._skip_counts)
            return [Observation(n, {"reason": reason}) for reason, n in counts.items()]

        meter.create_observable_counter(
            semconv.METRIC_SKIPPED,
            callbacks=[observe_skipped],
            unit="{span}",
            description="LLM spans skipped, by reason (tracefact.eval.skip_reason)",
        )
        if evictions is not None:
            read_evictions = evictions

            def observe_evicted(options: CallbackOptions) -> Iterable[Observation]:
                return [Observation(n, {"reason": r}) for r, n in read_evictions().items()]

            meter.create_observable_counter(
                semconv.METRIC_DOCUMENTS_EVICTED,
                callbacks=[observe_evicted],
                unit="{document}",
                description="retrieved documents evicted from the per-trace store, by reason",
            )

        def observe_depth(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(queue_depth())]

        meter.create_observable_gauge(
            "tracefact.eval.queue.depth",
            callbacks=[observe_depth],
            unit="{span}",
            description="sampled spans held for evaluation",
        )

    def span_finished(self, status: str, skip_reason: str | None = None) -> None:
        with self._counts_lock:
            self._span_counts[status] += 1
            if skip_reason is not None:
                self._skip_counts[skip_reason] += 1

    def evaluated(self, outcome: Outcome) -> None:
        result = outcome.result
        attributes = {"evaluator": outcome.evaluator, "status": outcome.status}
        if result is not None:
            attributes["label"] = result.label
            self._score.record(result.score, {"evaluator": outcome.evaluator})
        if outcome.cost_usd:
            self._cost.add(outcome.cost_usd, {"evaluator": outcome.evaluator})
        self._evaluations.add(1, attributes)
        self._duration.record(outcome.latency_ms, {"evaluator": outcome.evaluator})
