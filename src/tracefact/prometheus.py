"""A Prometheus endpoint for tracefact's OpenTelemetry metrics.

Prometheus scrapes; OpenTelemetry's Prometheus reader turns a meter provider's
instruments into its text format. The SDK serves one when asked
(`configure(prometheus=...)`), the collector always does. Each endpoint has its own
registry, so several can live in one process (tests, a collector with an SDK inside).
Needs the ``prometheus`` extra.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from wsgiref.simple_server import WSGIServer

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import Resource

from tracefact._imports import import_extra

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class PrometheusMetrics:
    """A meter provider whose metrics Prometheus can scrape.

    Args:
        resource: the provider's resource (service name and the like).
        readers: further readers of the same instruments (an OTLP metric exporter).
    """

    def __init__(
        self, resource: Resource | None = None, readers: Sequence[MetricReader] = ()
    ) -> None:
        client = import_extra("prometheus_client", "prometheus")
        exporter = import_extra("opentelemetry.exporter.prometheus", "prometheus")
        self._client = client
        self.registry = client.CollectorRegistry()
        reader = exporter.PrometheusMetricReader(registry=self.registry)
        self.meter_provider = MeterProvider(
            metric_readers=[reader, *readers], resource=resource or Resource.create()
        )
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def render(self) -> bytes:
        """The current metrics in Prometheus's text format, for a server of one's own."""
        text: bytes = self._client.generate_latest(self.registry)
        return text

    def serve(self, host: str = "127.0.0.1", port: int = 9464) -> int:
        """Serve `/metrics` on its own thread; returns the port (useful with port 0)."""
        server, thread = self._client.start_http_server(port, addr=host, registry=self.registry)
        self._server, self._thread = server, thread
        return int(server.server_port)

    def shutdown(self) -> None:
        """Stop the server, if any, and the meter provider."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self.meter_provider.shutdown()
