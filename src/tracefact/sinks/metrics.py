"""A sink's accounting as an OpenTelemetry metric.

Every result handed to a sink is counted once in `tracefact.sink.results` under its
outcome, so a backend that refuses or loses results shows up on a dashboard, not only
in a log.
"""

from __future__ import annotations

from typing import Literal

from opentelemetry import metrics
from opentelemetry.metrics import MeterProvider

from tracefact import semconv
from tracefact._version import __version__

SinkOutcome = Literal["delivered", "failed", "dropped"]
"""delivered: the backend accepted it; failed: refused, or retries ran out; dropped:
the sink's queue was full."""


class SinkMetrics:
    def __init__(self, sink: str, meter_provider: MeterProvider | None = None) -> None:
        meter = (meter_provider or metrics.get_meter_provider()).get_meter("tracefact", __version__)
        self._sink = sink
        self._results = meter.create_counter(
            semconv.METRIC_SINK_RESULTS,
            unit="{result}",
            description="evaluation results handed to a sink, by sink and outcome",
        )

    def count(self, outcome: SinkOutcome, results: int) -> None:
        if results:
            self._results.add(results, {"sink": self._sink, "outcome": outcome})
