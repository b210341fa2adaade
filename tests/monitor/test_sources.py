"""The monitor's sources: a real SDK's Prometheus endpoint, and a spans file as it grows."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

import tracefact
from tests.fakes.json_api import QuietHandler, base_url, local_server
from tests.monitor.spans import evaluated, spans_file
from tracefact.evaluators.lexical import LexicalOverlap
from tracefact.monitor.sources import PrometheusSource, SpansFileSource

FACT = "Paris is the capital of France."
INVENTED = "Berlin is a moon of Jupiter."
T0 = 1_780_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


pytestmark = pytest.mark.usefixtures("fresh_globals")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@tracefact.retriever
def search(query: str) -> list[str]:
    return [FACT]


def answer(model: str, invent: bool) -> None:
    with tracefact.span("generate", kind="llm", model=model) as span:
        search("capital")
        span.record(input="What is the capital of France?", output=INVENTED if invent else FACT)


def test_prometheus_source_reads_the_sdks_endpoint(tmp_path: Path) -> None:
    port = free_port()
    tracefact.configure(
        exporter=f"file:{tmp_path / 'spans.jsonl'}",
        evaluators=[LexicalOverlap()],
        prometheus_port=port,
        monitor_group_by=["model"],
    )
    clock = Clock()
    source = PrometheusSource(f"http://127.0.0.1:{port}/metrics", clock=clock)
    for i in range(30):
        answer("m-a", invent=i % 3 == 0)  # 10 of 30
        answer("m-b", invent=False)
    assert tracefact.force_flush(10_000)
    first = source.poll()
    assert first.error is None
    rows = {r.group["model"]: r for r in first.rows}
    assert set(rows) == {"m-a", "m-b"}
    assert {r.evaluator for r in first.rows} == {"hallucination"}
    assert rows["m-a"].rate == pytest.approx(1 / 3)
    assert rows["m-a"].lower < 1 / 3 < rows["m-a"].upper
    assert rows["m-b"].rate == 0.0 and rows["m-b"].coverage == 1.0
    assert rows["m-a"].n_eff == pytest.approx(30)
    assert first.statuses["ok"] == 60
    assert first.queues == {"evaluation": 0}
    assert first.drops["evaluation full"] == 0
    assert first.drops.get("export full", 0) == 0
    assert first.throughput == {}  # a rate needs two polls

    for _ in range(20):
        answer("m-b", invent=False)
    assert tracefact.force_flush(10_000)
    clock.now += 10
    second = source.poll()
    assert second.throughput == {"LLM spans": pytest.approx(2.0), "judged": pytest.approx(2.0)}
    assert {r.group["model"]: r.n_eff for r in second.rows}["m-b"] == pytest.approx(50)

    tracefact.shutdown()  # the endpoint goes away: the last figures stay, with the reason
    clock.now += 10
    gone = source.poll()
    assert gone.error is not None and "Connect" in gone.error
    assert gone.rows == second.rows


def test_prometheus_source_says_what_is_wrong_with_a_page() -> None:
    class Handler(QuietHandler):
        def do_GET(self) -> None:
            body = b"<html>not metrics</html>" if self.path == "/html" else b"nope"
            self.send_response(200 if self.path == "/html" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with local_server(Handler) as server:
        page = PrometheusSource(base_url(server) + "/html").poll()
        missing = PrometheusSource(base_url(server) + "/metrics").poll()
    assert page.error is not None and page.rows == []
    assert missing.error is not None and "404" in missing.error


def test_spans_file_source_follows_a_growing_file(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    clock = Clock()
    source = SpansFileSource(path, ("model",), window_seconds=60, clock=clock)
    waiting = source.poll()
    assert waiting.error is not None and "No such file" in waiting.error

    with spans_file(path) as writer:
        for i in range(20):
            writer.span("llm", evaluated("hallucinated" if i < 5 else "factual"), T0 + i)
        first = source.poll()
        assert [(r.group, r.rate) for r in first.rows] == [({"model": "m1"}, 0.25)]
        assert first.error is None and first.statuses == {"ok": 20}

        for i in range(10):
            writer.span("llm", evaluated("factual", model="m2"), T0 + 20 + i)
        writer.span("llm", evaluated(None, status="dropped", model="m2"), T0 + 30)
        clock.now += 5
        second = source.poll()
    rows = {r.group["model"]: r for r in second.rows}
    assert rows["m2"].rate == 0.0 and rows["m2"].coverage == pytest.approx(10 / 11)
    assert rows["m1"].rate == 0.25  # all of m1 is still inside the 60 s window
    assert second.throughput == {"LLM spans": pytest.approx(11 / 5), "judged": pytest.approx(2)}
    assert second.drops["dropped"] == 1


def test_spans_file_window_ends_at_the_newest_span(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    with spans_file(path) as writer:
        for i in range(100):  # 100 s: the first half all hallucinated, then none
            writer.span("llm", evaluated("hallucinated" if i < 50 else "factual"), T0 + i)
    (row,) = SpansFileSource(path, ("model",), window_seconds=30).poll().rows
    assert row.rate == 0.0 and row.n_eff is not None and 25 <= row.n_eff <= 31
