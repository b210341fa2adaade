"""configure() wires evaluation: defaults, options and TRACEFACT_* variables."""

from __future__ import annotations

import pytest

import tracefact
from tests.conftest import Spans
from tracefact.sampling import Never


@tracefact.llm(name="answer")
def answer(question: str, contexts: list[str]) -> str:
    return "Paris is the capital of France."


def test_default_evaluator_judges_llm_spans(spans: Spans) -> None:
    answer("capital?", ["Paris is the capital of France."])
    attributes = spans.one("answer").attributes
    assert attributes["tracefact.eval.status"] == "ok"
    assert attributes["tracefact.eval.hallucination.label"] == "factual"
    assert str(attributes["tracefact.eval.hallucination.evaluator"]).startswith("local-factuality")


def test_empty_evaluator_list_only_traces(spans: Spans) -> None:
    spans.reconfigure(evaluators=[])
    answer("capital?", ["ctx"])
    assert "tracefact.eval.status" not in spans.one("answer").attributes


def test_sampler_option(spans: Spans) -> None:
    spans.reconfigure(sampler=Never())
    answer("capital?", ["ctx"])
    assert spans.one("answer").attributes["tracefact.eval.status"] == "sampled_out"


def test_options_from_environment(spans: Spans, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEFACT_SAMPLE_RATE", "0")
    spans.reconfigure()
    answer("capital?", ["ctx"])
    assert spans.one("answer").attributes["tracefact.eval.status"] == "sampled_out"


def test_evaluator_specs_from_environment(spans: Spans, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEFACT_EVALUATORS", "lexical:0.9")
    spans.reconfigure()
    answer("capital?", ["Berlin is the capital of Germany."])
    attributes = spans.one("answer").attributes
    assert attributes["tracefact.eval.hallucination.evaluator"] == "lexical-overlap(threshold=0.9)"


def test_unknown_evaluator_spec_fails_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEFACT_EVALUATORS", "oracle")
    with pytest.raises(ValueError, match="unknown evaluator 'oracle'"):
        tracefact.configure(exporter="none")


def test_span_mode_from_option(spans: Spans) -> None:
    spans.reconfigure(attach="span")
    answer("capital?", ["Paris is the capital of France."])
    kinds = sorted(str(s.attributes["openinference.span.kind"]) for s in spans.all())
    assert kinds == ["EVALUATOR", "LLM"]
