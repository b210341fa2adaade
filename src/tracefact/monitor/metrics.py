"""The estimator as OpenTelemetry metrics: counters that add up, gauges that do not.

Per evaluator and group, the counters Σw, Σw·y, Σw², Σw²·y (and spans by status) add
up across processes and over time, so Prometheus's recording rules compute the rate and
its interval for a fleet over any window (collector/prometheus/). The gauges are this
process's own windowed estimate, for a look at one process.

The instruments exist once per meter provider: the SDK keeps only the first callbacks
registered under a name, so a monitor built by a later `configure()` takes over the
gauges of the same provider instead of registering new ones.

The counters are observable: each judged span adds to sums kept here under a lock, read
at collection. Five synchronous `Counter.add` calls per span, each cleaning and hashing
its attributes in the SDK, cost the evaluation thread more than judging the span.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterable

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from tracefact import semconv
from tracefact._version import __version__
from tracefact.monitor.estimator import Estimate, RateEstimator
from tracefact.monitor.estimator import Observation as Outcome


class MonitorMetrics:
    """The monitor's instruments on one meter provider."""

    def __init__(self, meter_provider: MeterProvider) -> None:
        meter = meter_provider.get_meter("tracefact", __version__)
        self._estimator: weakref.ref[RateEstimator] | None = None
        self._lock = threading.Lock()  # guards the sums; held for no call out
        self._spans: Counter[frozenset[tuple[str, str]]] = Counter()
        # Per attribute set (group and evaluator): Σw, Σw·y, Σw², Σw²·y.
        self._sums: dict[frozenset[tuple[str, str]], list[float]] = {}
        sums = (
            (semconv.METRIC_MONITOR_WEIGHT, 0, "Σw over judged spans (w = 1 / sample rate)"),
            (semconv.METRIC_MONITOR_HALLUCINATED_WEIGHT, 1, "Σw·y (y = 1: hallucinated)"),
            (semconv.METRIC_MONITOR_WEIGHT_SQUARED, 2, "Σw² over judged spans"),
            (semconv.METRIC_MONITOR_HALLUCINATED_WEIGHT_SQUARED, 3, "Σw²·y"),
        )
        for name, index, description in sums:
            meter.create_observable_counter(
                name, callbacks=[self._sum_observer(index)], description=description
            )
        meter.create_observable_counter(
            semconv.METRIC_MONITOR_SPANS,
            callbacks=[self._observe_spans],
            unit="{span}",
            description="sampled spans by status: ok (judged) or why not",
        )
        gauges: tuple[tuple[str, Callable[[Estimate], float | None], str], ...] = (
            (semconv.METRIC_MONITOR_RATE, lambda e: e.rate, "windowed hallucination rate"),
            (semconv.METRIC_MONITOR_RATE_LOWER, lambda e: e.lower, "its 95% lower bound"),
            (semconv.METRIC_MONITOR_RATE_UPPER, lambda e: e.upper, "its 95% upper bound"),
            (semconv.METRIC_MONITOR_N_EFF, lambda e: e.n_eff, "Kish effective sample size"),
            (semconv.METRIC_MONITOR_COVERAGE, lambda e: e.coverage, "judged / sampled spans"),
        )
        for name, value, description in gauges:
            meter.create_observable_gauge(
                name, callbacks=[self._observer(value)], description=description
            )

    def follow(self, estimator: RateEstimator) -> None:
        """Publish `estimator`'s windowed estimates in the gauges (the latest one wins)."""
        self._estimator = weakref.ref(estimator)

    def record(self, outcome: Outcome, labels: dict[str, str]) -> None:
        """Add one observation (its group already bounded) to the counters."""
        attributes = {**labels, semconv.MONITOR_EVALUATOR: outcome.evaluator}
        spans_key = frozenset({**attributes, semconv.MONITOR_STATUS: outcome.status}.items())
        judged = outcome.status == semconv.STATUS_OK and outcome.hallucinated is not None
        key = frozenset(attributes.items())
        w = outcome.weight
        # Added even when 0: a group's series must exist for Prometheus's ratios.
        y = 1.0 if outcome.hallucinated else 0.0
        with self._lock:
            self._spans[spans_key] += 1
            if not judged:
                return
            sums = self._sums.get(key)
            if sums is None:
                sums = self._sums[key] = [0.0, 0.0, 0.0, 0.0]
            sums[0] += w
            sums[1] += w * y
            sums[2] += w * w
            sums[3] += w * w * y

    def _observe_spans(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            counts = list(self._spans.items())
        return [Observation(n, dict(key)) for key, n in counts]

    def _sum_observer(self, index: int) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            with self._lock:
                values = [(key, sums[index]) for key, sums in self._sums.items()]
            return [Observation(value, dict(key)) for key, value in values]

        return observe

    def _observer(
        self, value: Callable[[Estimate], float | None]
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            estimator = self._estimator() if self._estimator is not None else None
            if estimator is None:
                return []
            observations = []
            for estimate in estimator.estimates():
                number = value(estimate)
                if number is not None:
                    attributes = {**estimate.group, semconv.MONITOR_EVALUATOR: estimate.evaluator}
                    observations.append(Observation(number, attributes))
            return observations

        return observe


_lock = threading.Lock()
_by_provider: weakref.WeakKeyDictionary[MeterProvider, MonitorMetrics] = weakref.WeakKeyDictionary()


def monitor_metrics(meter_provider: MeterProvider | None = None) -> MonitorMetrics:
    """The instruments of `meter_provider` (default the global one), created on first use."""
    provider = meter_provider or metrics.get_meter_provider()
    with _lock:
        found = _by_provider.get(provider)
        if found is None:
            found = _by_provider[provider] = MonitorMetrics(provider)
        return found
