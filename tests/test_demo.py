"""The demo that `make demo` runs: offline, every answer judged, a summary at the end."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from tests.conftest import reset_global_tracer_provider
from tracefact.cli import main
from tracefact.monitor.report import build_report

DEMO = Path(__file__).resolve().parents[1] / "examples" / "rag_demo.py"


def test_demo_prints_each_answer_with_its_evaluation(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("rag_demo", DEMO)
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    sys.modules["rag_demo"] = demo
    reset_global_tracer_provider()
    try:
        spec.loader.exec_module(demo)
        demo.main(["--hallucination-rate", "0.5", "--seed", "1"])
    finally:
        reset_global_tracer_provider()
        del sys.modules["rag_demo"]
    out = capsys.readouterr().out
    assert out.count("question:") == len(demo.QUESTIONS)
    assert "✗ hallucinated" in out and "✓ factual" in out
    assert "why:" in out
    assert f"summary: {len(demo.QUESTIONS)} answers, {len(demo.QUESTIONS)} evaluated" in out
    # What the demo invented beside what the evaluator reports, so a user sees the misses.
    invented = sum(
        answer in demo.INVENTIONS.values() for answer in re.findall(r"answer: +(.*)", out)
    )
    share = invented / len(demo.QUESTIONS)
    assert f"true hallucination rate {share:.1%} ({invented} invented answers), reported" in out


def test_demo_spans_file_is_what_the_report_draws(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make demo`'s path: the demo writes its spans, `tracefact report` draws both models."""
    spec = importlib.util.spec_from_file_location("rag_demo", DEMO)
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    sys.modules["rag_demo"] = demo
    reset_global_tracer_provider()
    spans = tmp_path / "spans.jsonl"
    try:
        spec.loader.exec_module(demo)
        demo.main(["--requests", "24", "--spans", str(spans)])
    finally:
        reset_global_tracer_provider()
        del sys.modules["rag_demo"]
    assert "... and 16 more requests" in capsys.readouterr().out
    page = tmp_path / "report.html"
    assert main(["report", str(spans), "--html", str(page)]) == 0
    report = build_report(spans)
    assert report.statuses == {"ok": 24}
    assert {e.group["model"]: e.totals.judged for e in report.by_group} == {
        "fake-llm-1": 12,
        "fake-llm-mini": 12,
    }
    assert "model=fake-llm-mini" in page.read_text(encoding="utf-8")
