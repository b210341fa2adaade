"""Sinks wired to a real pipeline, with metrics read back in memory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader


class SinkCounts:
    """`tracefact.sink.results` by (sink, outcome), as a metrics backend would read it."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])

    def __call__(self) -> dict[tuple[str, str], int]:
        counts: dict[tuple[str, str], int] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != "tracefact.sink.results":
                        continue
                    for point in metric.data.data_points:
                        key = (str(point.attributes["sink"]), str(point.attributes["outcome"]))
                        counts[key] = int(point.value)
        return counts


@pytest.fixture
def sink_counts() -> Iterator[SinkCounts]:
    counts = SinkCounts()
    yield counts
    counts.provider.shutdown()
