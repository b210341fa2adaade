"""`RateMonitor`: the pipeline's span observer that keeps the live rate and its metrics."""

from __future__ import annotations

from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan

from tracefact.monitor.estimator import RateEstimator
from tracefact.monitor.metrics import monitor_metrics


class RateMonitor:
    """Feeds every sampled span the pipeline finishes to an estimator and the counters.

    Pass it to `EvaluationProcessor(observers=[...])`; `configure()` builds one.
    """

    def __init__(
        self, estimator: RateEstimator | None = None, meter_provider: MeterProvider | None = None
    ) -> None:
        self.estimator = estimator or RateEstimator()
        self._metrics = monitor_metrics(meter_provider)
        self._metrics.follow(self.estimator)

    def observe(self, span: ReadableSpan) -> None:
        """Record the span's outcome per evaluator; a span not sampled changes nothing."""
        resource = span.resource.attributes if span.resource is not None else {}
        for outcome in self.estimator.add_span(span.attributes or {}, resource):
            self._metrics.record(outcome, self.estimator.labels(outcome.group))
