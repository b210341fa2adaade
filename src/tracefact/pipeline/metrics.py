"""The pipeline's accounting as OpenTelemetry metrics.

Every LLM span that enters is counted once in `tracefact.eval.spans` under its final
status, so `sum(by status) == LLM spans seen` is checkable from any metrics backend.

The instruments exist once per meter provider, for the life of the process: the SDK
keeps only the first callbacks registered under a name, so a pipeline built by a
second `configure()` feeds the same counts, and counters stay cumulative.
"""

from __future__ import annotations

import functools
import itertools
import threading
import weakref
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from tracefact import semconv
from tracefact._version import __version__
from tracefact.pipeline.verdict import Outcome

Observer = Callable[[CallbackOptions], Iterable[Observation]]

MAX_QUEUED_EVALUATIONS = 65536
"""Outcomes queued for their metrics (about 9 MiB) before they are recorded without waiting
for a reader to collect them: a scrape every 15 s keeps up with 4,000 evaluations a second."""

_Finished = tuple[str, str, str | None, float | None, float, float | None]
"""An outcome as its metrics need it: evaluator, status, label, score, latency (ms), cost."""


class Tally:
    """A count that application threads add to without taking a lock.

    `add` is `next` on an `itertools.count`: one C call, atomic under the GIL, no Python
    frame. Reading takes a number too; reads are counted and taken off, so `value` must
    be called under its owner's lock.
    """

    def __init__(self) -> None:
        numbers = itertools.count()
        self._numbers = numbers
        self.add: Callable[[], int] = functools.partial(next, numbers)
        self._reads = 0

    def value(self) -> int:
        """How many times `add` was called (under the owner's lock)."""
        taken = next(self._numbers)
        self._reads += 1
        return taken - self._reads + 1


class ProcessMetrics:
    """tracefact's instruments on one meter provider, and the counts behind them."""

    def __init__(self, meter_provider: MeterProvider) -> None:
        meter = meter_provider.get_meter("tracefact", __version__)
        # Spans are counted on application threads: a locked dict increment, read by
        # observable counters, costs far less there than a synchronous Counter.add.
        self._lock = threading.Lock()
        self._span_counts: Counter[str] = Counter()
        self._sampled_out = Tally()
        """LLM spans refused as they started: the commonest count, so no lock."""
        self.sampled_out = self._sampled_out.add
        self._export_drops: Counter[str] = Counter()
        self._skip_counts: Counter[str] = Counter()
        self.pipelines: weakref.WeakSet[PipelineMetrics] = weakref.WeakSet()
        # Evaluations too, by attribute set, and their scores, latencies and costs: each is
        # queued on the evaluation thread and recorded as the metrics are collected (or
        # once MAX_QUEUED_EVALUATIONS wait), since a synchronous instrument cleans, hashes
        # and aggregates its attributes per call: a seventh of the loop's work per span.
        self._evaluation_counts: Counter[frozenset[tuple[str, str]]] = Counter()
        self._finished: deque[_Finished] = deque()
        self.score = meter.create_histogram(
            semconv.METRIC_EVAL_SCORE, description="hallucination score (1 = hallucinated)"
        )
        self.duration = meter.create_histogram(
            semconv.METRIC_EVAL_DURATION, unit="ms", description="evaluation latency"
        )
        self.cost = meter.create_counter(
            semconv.METRIC_EVAL_COST, unit="USD", description="evaluation spend"
        )
        counters: tuple[tuple[str, Observer, str, str], ...] = (
            (
                semconv.METRIC_EVALUATIONS,
                self._observe_evaluations,
                "{evaluation}",
                "evaluations by evaluator, label and status",
            ),
            (
                semconv.METRIC_EVAL_SPANS,
                self._observe_spans,
                "{span}",
                "LLM spans by evaluation status",
            ),
            (
                semconv.METRIC_EVAL_DROPPED,
                self._observe_dropped,
                "{span}",
                "LLM spans not evaluated: no room in flight (status dropped)",
            ),
            (
                semconv.METRIC_EXPORT_DROPPED,
                self._by_key(self._export_drops, "reason"),
                "{span}",
                "spans that never reached an exporter, by reason",
            ),
            (
                semconv.METRIC_SKIPPED,
                self._by_key(self._skip_counts, "reason"),
                "{span}",
                "LLM spans skipped, by reason (tracefact.eval.skip_reason)",
            ),
            (
                semconv.METRIC_DOCUMENTS_EVICTED,
                self._observe_evicted,
                "{document}",
                "retrieved documents evicted from the per-trace store, by reason",
            ),
        )
        for name, observe, unit, description in counters:
            meter.create_observable_counter(
                name, callbacks=[observe], unit=unit, description=description
            )
        meter.create_observable_gauge(
            semconv.METRIC_EVAL_QUEUE_DEPTH,
            callbacks=[self._observe_depth],
            unit="{span}",
            description="sampled spans in flight (admitted, not yet released)",
        )

    def span_finished(self, status: str, skip_reason: str | None = None) -> None:
        with self._lock:
            self._span_counts[status] += 1
            if skip_reason is not None:
                self._skip_counts[skip_reason] += 1

    def evaluation_finished(self, outcome: Outcome) -> None:
        """Queue what the metrics need of an evaluator's outcome: one append, no lock."""
        result, finished = outcome.result, self._finished
        finished.append(
            (
                outcome.evaluator,
                outcome.status,
                None if result is None else result.label,
                None if result is None else result.score,
                outcome.latency_ms,
                outcome.cost_usd,
            )
        )
        if len(finished) > MAX_QUEUED_EVALUATIONS:  # no reader collects: bounded all the same
            self._record_finished()

    def _record_finished(self) -> None:
        """Record every queued outcome on the instruments (as the readers collect).

        The SDK runs the observable callbacks before it collects the synchronous
        instruments' storages, so what is recorded here is in that same collection.
        """
        finished, counts = self._finished, Counter[frozenset[tuple[str, str]]]()
        while finished:
            evaluator, status, label, score, latency_ms, cost_usd = finished.popleft()
            by_evaluator = {"evaluator": evaluator}
            attributes = {**by_evaluator, "status": status}
            if label is not None and score is not None:
                attributes["label"] = label
                self.score.record(score, by_evaluator)
            if cost_usd:
                self.cost.add(cost_usd, by_evaluator)
            self.duration.record(latency_ms, by_evaluator)
            counts[frozenset(attributes.items())] += 1
        with self._lock:
            self._evaluation_counts.update(counts)

    def export_dropped(self, reason: str, count: int) -> None:
        with self._lock:
            self._export_drops[reason] += count

    def _by_key(self, counts: Counter[str], label: str) -> Observer:
        """An observer of `counts`, one observation per key, as the attribute `label`."""

        def observe(options: CallbackOptions) -> Iterable[Observation]:
            with self._lock:
                snapshot = dict(counts)
            return [Observation(n, {label: key}) for key, n in snapshot.items()]

        return observe

    def _observe_spans(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            snapshot = Counter(self._span_counts)
            snapshot[semconv.STATUS_SAMPLED_OUT] += self._sampled_out.value()
        return [Observation(n, {"status": status}) for status, n in snapshot.items() if n]

    def _observe_evaluations(self, options: CallbackOptions) -> Iterable[Observation]:
        self._record_finished()
        with self._lock:
            snapshot = list(self._evaluation_counts.items())
        return [Observation(n, dict(key)) for key, n in snapshot]

    def _observe_dropped(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            return [Observation(self._span_counts[semconv.STATUS_DROPPED])]

    def _observe_depth(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(sum(p.queue_depth() for p in list(self.pipelines)))]

    def _observe_evicted(self, options: CallbackOptions) -> Iterable[Observation]:
        totals: Counter[str] = Counter()
        for pipeline in list(self.pipelines):
            totals.update(pipeline.evictions())
        return [Observation(n, {"reason": reason}) for reason, n in totals.items()]


_lock = threading.Lock()
_by_provider: weakref.WeakKeyDictionary[MeterProvider, ProcessMetrics] = weakref.WeakKeyDictionary()


def process_metrics(meter_provider: MeterProvider | None = None) -> ProcessMetrics:
    """The instruments of `meter_provider` (default the global one), created on first use."""
    provider = meter_provider or metrics.get_meter_provider()
    with _lock:
        found = _by_provider.get(provider)
        if found is None:
            found = _by_provider[provider] = ProcessMetrics(provider)
        return found


class PipelineMetrics:
    """One pipeline's view of its provider's instruments."""

    def __init__(
        self,
        queue_depth: Callable[[], int],
        meter_provider: MeterProvider | None = None,
        evictions: Callable[[], Mapping[str, int]] = dict,
    ) -> None:
        self.queue_depth = queue_depth
        self.evictions = evictions
        """Documents evicted so far from the pipeline's per-trace store, by reason."""
        self._process = process_metrics(meter_provider)
        self._process.pipelines.add(self)
        self.span_finished: Callable[[str, str | None], None] = self._process.span_finished
        """Count a span leaving the pipeline under its final status (upstream ones too).

        A skipped span is also counted under its reason. The process's own counter, bound
        once: every LLM span passes here on an application thread.
        """
        self.sampled_out: Callable[[], object] = self._process.sampled_out
        """Count a span refused as it started (`sampled_out`): no lock, no Python frame."""
        self.evaluated: Callable[[Outcome], None] = self._process.evaluation_finished
        """Count an evaluator's outcome, its score, latency and cost (queued, no lock)."""
