"""`RateMonitor`: the pipeline's span observer that keeps the live rate and its metrics."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.metrics import MeterProvider

from tracefact import semconv
from tracefact.monitor.estimator import RateEstimator
from tracefact.monitor.metrics import monitor_metrics
from tracefact.pipeline.verdict import SpanRecord, Verdict

WINDOW_BUCKETS = 30
"""The live rate's window slides by a thirtieth of its length (10 s in 5 minutes)."""
DEFAULT_GROUP_BY = ("service", "model")
DEFAULT_MAX_GROUPS = 50
DEFAULT_WINDOW_SECONDS = 300.0


class RateMonitor:
    """Feeds every sampled span's final verdict to an estimator and the counters.

    Pass it to `EvaluationProcessor(observers=[...])`; `configure()` builds one.
    """

    def __init__(
        self, estimator: RateEstimator | None = None, meter_provider: MeterProvider | None = None
    ) -> None:
        self.estimator = estimator or RateEstimator()
        self._metrics = monitor_metrics(meter_provider)
        self._metrics.follow(self.estimator)

    def observe(self, record: SpanRecord, verdict: Verdict) -> None:
        """Record the verdict per evaluator, grouped by the span's attributes and resource.

        A span skipped or not sampled changes nothing.
        """
        status = verdict.status
        if status != semconv.STATUS_OK and status not in semconv.UNJUDGED_STATUSES:
            return  # checked first: this runs on application threads too
        estimator = self.estimator
        observations = estimator.observations_of(
            verdict.span_results(), record.attributes, record.resource
        )
        for observation in observations:
            outcome = estimator.add(observation)
            self._metrics.record(outcome, estimator.labels(outcome.group))


def rate_monitor(
    evaluators: Sequence[str],
    meter_provider: MeterProvider | None = None,
    *,
    group_by: Sequence[str] = DEFAULT_GROUP_BY,
    max_groups: int = DEFAULT_MAX_GROUPS,
    window_seconds: float = DEFAULT_WINDOW_SECONDS,
) -> RateMonitor:
    """A monitor for a pipeline of these evaluators, its window sliding in 30 steps.

    `configure()` builds its monitor here from the `monitor_*` options, the collector
    from its `evaluation.monitor` keys (pass it as `EvaluationProcessor(observers=[...])`).
    """
    estimator = RateEstimator(
        group_by=group_by,
        max_groups=max_groups,
        window_seconds=window_seconds,
        bucket_seconds=window_seconds / WINDOW_BUCKETS,
        evaluators=evaluators,
    )
    return RateMonitor(estimator, meter_provider)
