"""The collector holds selections and labels: the corrected rate on its /metrics."""

from __future__ import annotations

import io
from pathlib import Path

import httpx
import pytest
from rich.console import Console

from tests.collector.harness import base_config, running_collector, wait_until
from tests.fakes.otlp import otlp_receiver
from tests.monitor.test_collector import write_spans
from tests.review.fake_phoenix import FakePhoenix, human
from tracefact.monitor.sources import PrometheusSource, parse_prometheus_text
from tracefact.monitor.terminal import view

pytestmark = pytest.mark.usefixtures("fresh_globals")


def review_gauges(url: str) -> dict[str, float]:
    samples = parse_prometheus_text(httpx.get(url, timeout=5).text)
    return {s.name: s.value for s in samples if s.name.startswith("tracefact_review_")}


def test_labels_polled_from_phoenix_give_the_corrected_rate_on_metrics(
    tmp_path: Path, fake_phoenix: str
) -> None:
    spans = tmp_path / "spans.jsonl"
    write_spans(spans, requests=10)  # half the answers name the wrong city
    review = {
        "probabilities": {"*": 1.0},
        "min_labels": 1,
        "phoenix_endpoint": fake_phoenix,
        "poll_seconds": 0.1,
        "state_path": str(tmp_path / "review.journal"),
    }
    with (
        otlp_receiver() as upstream,
        running_collector(tmp_path / "c.yaml", base_config(upstream.endpoint, review=review)) as c,
    ):
        for line in spans.read_text(encoding="utf-8").splitlines():
            httpx.post(
                f"{c.http}/v1/traces",
                content=line,
                headers={"Content-Type": "application/json"},
                timeout=10,
            ).raise_for_status()
        assert upstream.wait_for(20, timeout=30)
        llm = [
            span
            for _, span in upstream.spans()
            if any(a.key == "tracefact.review.selected" for a in span.attributes)
        ]
        assert len(llm) == 10
        pending = review_gauges(f"{c.http}/metrics")
        assert pending["tracefact_review_pending"] == 10
        assert pending["tracefact_review_shown"] == 0
        # people label every selected span: the wrong city is a hallucination
        for span in llm:
            output = next(a.value.string_value for a in span.attributes if a.key == "output.value")
            label = "hallucinated" if "Lyon" in output else "factual"
            FakePhoenix.annotations.append(human(span.span_id.hex(), label))
        assert wait_until(
            lambda: review_gauges(f"{c.http}/metrics").get("tracefact_review_labels") == 10
        )
        gauges = review_gauges(f"{c.http}/metrics")
        snapshot = PrometheusSource(f"{c.http}/metrics").poll()
    (row,) = snapshot.review
    assert row.evaluator.startswith("hallucination (lexical")  # name and version
    assert (row.shown, row.labels, row.pending) == (True, 10, 0)
    assert row.rate == pytest.approx(0.5)
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(view(snapshot, 1.0, live=False))
    screen = console.export_text()
    assert "corrected by people: hallucination" in screen
    assert "50.0% [50.0%, 50.0%]  ·  labels 10  ·  pending 0" in screen
    assert max(len(line) for line in screen.splitlines()) <= 80
    assert gauges["tracefact_review_shown"] == 1
    assert gauges["tracefact_review_rate"] == pytest.approx(0.5)
    assert gauges["tracefact_review_rate_lower"] == pytest.approx(0.5)  # all labelled
    assert gauges["tracefact_review_pending"] == 0
    assert len((tmp_path / "review.journal").read_text().splitlines()) == 10


def test_selections_made_by_an_sdk_app_upstream_are_held_by_the_collector(
    tmp_path: Path,
) -> None:
    import tracefact
    from tests.pipeline.helpers import ScriptedEvaluator

    review = {"probabilities": {"*": 1.0}, "min_labels": 1}
    with (
        otlp_receiver() as upstream,
        running_collector(tmp_path / "c.yaml", base_config(upstream.endpoint, review=review)) as c,
    ):
        tracefact.configure(
            exporter="otlp",
            endpoint=c.http,
            evaluators=[ScriptedEvaluator("judge")],
            review_probabilities={"hallucinated": 1.0, "factual": 0.0},
        )
        for output in ("hallucinated", "ok", "hallucinated"):
            with tracefact.span("answer", kind="llm") as span:
                span.record(input="q", contexts=["ctx"], output=output)
        assert tracefact.force_flush(10_000)
        tracefact.shutdown()
        assert upstream.wait_for(3, timeout=30)
        assert wait_until(
            lambda: review_gauges(f"{c.http}/metrics").get("tracefact_review_pending") == 2
        )
        gauges = review_gauges(f"{c.http}/metrics")
    assert gauges["tracefact_review_labels"] == 0
    assert gauges["tracefact_review_shown"] == 0
