"""The collector's own instruments, on the meter provider its `/metrics` endpoint reads.

The pipeline's (`tracefact.eval.spans` by status: evaluated, skipped, dropped...) live on
the same provider, so one scrape shows both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from tracefact import semconv
from tracefact._version import __version__


class CollectorMetrics:
    """Counters the receivers, the engine and the forwarder add to."""

    def __init__(self, meter_provider: MeterProvider) -> None:
        self._meter = meter = meter_provider.get_meter("tracefact.collector", __version__)
        self.received = meter.create_counter(
            semconv.METRIC_COLLECTOR_RECEIVED, unit="{span}", description="spans received"
        )
        self.forwarded = meter.create_counter(
            semconv.METRIC_COLLECTOR_FORWARDED,
            unit="{span}",
            description="spans an upstream accepted",
        )
        self.rejected = meter.create_counter(
            semconv.METRIC_COLLECTOR_REJECTED,
            unit="{request}",
            description="requests refused, by reason",
        )
        self.retries = meter.create_counter(
            semconv.METRIC_COLLECTOR_UPSTREAM_RETRIES,
            unit="{request}",
            description="upstream requests retried after a transient failure",
        )
        self.failed = meter.create_counter(
            semconv.METRIC_COLLECTOR_UPSTREAM_FAILED,
            unit="{span}",
            description="spans that never reached an upstream, by reason",
        )
        self.limited = meter.create_counter(
            semconv.METRIC_COLLECTOR_LIMITED,
            unit="{attribute}",
            description="attributes of spans, events, links, resources, scopes dropped or cut",
        )
        self.redelivered = meter.create_counter(
            semconv.METRIC_COLLECTOR_REDELIVERED,
            unit="{span}",
            description="spans of queue entries handed out again: possible duplicates",
        )
        self.requeued = meter.create_counter(
            semconv.METRIC_COLLECTOR_REQUEUED,
            unit="{request}",
            description="queue entries left unacknowledged at shutdown for another consumer",
        )
        self.expired = meter.create_counter(
            semconv.METRIC_COLLECTOR_EXPIRED,
            unit="{span}",
            description="LLM spans sent on unevaluated: too old, or redelivered too often",
        )

        self.restarts = meter.create_counter(
            semconv.METRIC_COLLECTOR_RESTARTS,
            unit="{restart}",
            description="background loops restarted after they raised",
        )

    def gauge(self, name: str, unit: str, description: str, read: Callable[[], int]) -> None:
        """An observable gauge reading `read()` at each scrape."""

        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(read())]

        self._meter.create_observable_gauge(
            name, callbacks=[observe], unit=unit, description=description
        )
