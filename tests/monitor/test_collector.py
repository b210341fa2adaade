"""The spans file and the monitor with the real collector (`tracefact collector`).

A spans file's lines are OTLP/JSON export requests: the collector takes them as they are.
The monitor's Prometheus source reads the collector's own `/metrics`, live rate included.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

import tracefact
from tests.collector.harness import base_config, running_collector, wait_until
from tests.fakes.otlp import otlp_receiver
from tracefact.monitor.sources import PrometheusSource, parse_prometheus_text

pytestmark = pytest.mark.usefixtures("fresh_globals")


def forwarded(url: str) -> float:
    samples = parse_prometheus_text(httpx.get(url, timeout=5).text)
    return sum(s.value for s in samples if s.name == PrometheusSource.FORWARDED)


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


@tracefact.retriever
def search(query: str) -> list[str]:
    return ["Paris is the capital of France."]


def write_spans(path: Path, requests: int) -> None:
    """An app's spans, not evaluated (no evaluators): the collector judges them."""
    tracefact.configure(exporter=f"file:{path}", evaluators=[], export_batch_size=4)
    for i in range(requests):
        with tracefact.span("generate", kind="llm", model="file-model") as span:
            search("capital of France")
            invented = "Lyon is the capital of France." if i % 2 else ""
            span.record(input="Capital?", output=invented or "Paris is the capital of France.")
    assert tracefact.force_flush(10_000)
    tracefact.shutdown()


def test_the_collector_takes_spans_file_lines_and_the_monitor_reads_its_metrics(
    tmp_path: Path,
) -> None:
    spans = tmp_path / "spans.jsonl"
    write_spans(spans, requests=10)
    lines = spans.read_text(encoding="utf-8").splitlines()
    assert len(lines) >= 5  # batches of 4 spans: several requests
    with (
        otlp_receiver() as upstream,
        running_collector(tmp_path / "collector.yaml", base_config(upstream.endpoint)) as c,
    ):
        clock = Clock()
        source = PrometheusSource(f"{c.http}/metrics", clock=clock)
        before = source.poll()
        assert before.error is None, before.error
        for line in lines:
            response = httpx.post(
                f"{c.http}/v1/traces",
                content=line,
                headers={"Content-Type": "application/json"},
                timeout=10,
            )
            assert response.status_code == 200, response.text
        upstream.wait_for(20, timeout=30)
        received = upstream.spans()
        assert len(received) == 20
        judged = [
            span
            for _, span in received
            if any(a.key == "tracefact.eval.status" for a in span.attributes)
        ]
        assert len(judged) == 10  # every LLM span evaluated by the collector
        assert wait_until(lambda: forwarded(f"{c.http}/metrics") == 20)  # counted after
        # the upstream answered, which can be a moment after it received them
        clock.now += 10
        after = source.poll()
    assert after.error is None
    assert after.statuses == {"ok": 10}
    (row,) = after.rows  # the collector's own live rate, for the one model
    assert row.evaluator == "hallucination" and row.group["model"] == "file-model"
    assert row.rate == pytest.approx(0.5) and row.lower < 0.5 < row.upper
    assert row.coverage == 1.0
    assert after.throughput["received"] == pytest.approx(20 / 10)
    assert after.throughput["forwarded"] == pytest.approx(20 / 10)
    assert after.throughput["judged"] == pytest.approx(10 / 10)
    assert after.queues["requests"] == 0 and after.queues["forwarding"] == 0
    assert after.drops.get("evaluation full", 0) == 0
