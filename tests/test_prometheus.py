"""The Prometheus endpoint serves the metrics of its own meter provider."""

from __future__ import annotations

import httpx

from tracefact.prometheus import PrometheusMetrics


def test_two_endpoints_in_one_process_serve_their_own_metrics() -> None:
    first, second = PrometheusMetrics(), PrometheusMetrics()
    try:
        first.meter_provider.get_meter("t").create_counter("tracefact.test.spans").add(3)
        port = first.serve(port=0)
        scraped = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        assert "tracefact_test_spans_total" in scraped
        assert "tracefact_test_spans_total" not in second.render().decode()
    finally:
        first.shutdown()
        second.shutdown()
