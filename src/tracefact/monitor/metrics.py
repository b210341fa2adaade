"""The estimator as OpenTelemetry metrics: counters that add up, gauges that do not.

Per evaluator and group, the counters Σw, Σw·y, Σw², Σw²·y (and spans by status) add
up across processes and over time, so Prometheus's recording rules compute the rate and
its interval for a fleet over any window (collector/prometheus/). The gauges are this
process's own windowed estimate, for a look at one process.

The instruments exist once per meter provider: the SDK keeps only the first callbacks
registered under a name, so a monitor built by a later `configure()` takes over the
gauges of the same provider instead of registering new ones.
"""

from __future__ import annotations

import threading
import weakref
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
        sums = (
            (semconv.METRIC_MONITOR_WEIGHT, "Σw over judged spans (w = 1 / sample rate)"),
            (semconv.METRIC_MONITOR_HALLUCINATED_WEIGHT, "Σw·y (y = 1: hallucinated)"),
            (semconv.METRIC_MONITOR_WEIGHT_SQUARED, "Σw² over judged spans"),
            (semconv.METRIC_MONITOR_HALLUCINATED_WEIGHT_SQUARED, "Σw²·y"),
        )
        self._weight, self._hallucinated, self._squared, self._hallucinated_squared = (
            meter.create_counter(name, description=description) for name, description in sums
        )
        self._spans = meter.create_counter(
            semconv.METRIC_MONITOR_SPANS,
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
        self._spans.add(1, {**attributes, semconv.MONITOR_STATUS: outcome.status})
        if outcome.status != semconv.STATUS_OK or outcome.hallucinated is None:
            return
        w = outcome.weight
        self._weight.add(w, attributes)
        self._squared.add(w * w, attributes)
        # Added even when 0: a group's series must exist for Prometheus's ratios.
        y = 1.0 if outcome.hallucinated else 0.0
        self._hallucinated.add(w * y, attributes)
        self._hallucinated_squared.add(w * w * y, attributes)

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
