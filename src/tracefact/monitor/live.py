"""`RateMonitor`: the pipeline's span observer that keeps the live rate and its metrics."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan

from tracefact.monitor.estimator import RateEstimator
from tracefact.monitor.metrics import monitor_metrics
from tracefact.pipeline.reading import plain_attributes

WINDOW_BUCKETS = 30
"""The live rate's window slides by a thirtieth of its length (10 s in 5 minutes)."""


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
        for outcome in self.estimator.add_span(plain_attributes(span), resource):
            self._metrics.record(outcome, self.estimator.labels(outcome.group))


def rate_monitor(
    evaluators: Sequence[str],
    meter_provider: MeterProvider | None = None,
    *,
    group_by: Sequence[str] = ("service", "model"),
    max_groups: int = 50,
    window_seconds: float = 300.0,
) -> RateMonitor:
    """A monitor for a pipeline of these evaluators, its window sliding in 30 steps.

    `configure()` builds its monitor here from the `monitor_*` options; so can any other
    host of the pipeline (pass it as `EvaluationProcessor(observers=[...])`).
    """
    estimator = RateEstimator(
        group_by=group_by,
        max_groups=max_groups,
        window_seconds=window_seconds,
        bucket_seconds=window_seconds / WINDOW_BUCKETS,
        evaluators=evaluators,
    )
    return RateMonitor(estimator, meter_provider)
