"""The SDK under hostile values: a huge return value, evaluators' bad results, secrets.

Secrets in what tracefact adds: contexts copied from a retriever, a Cascade's escalation error.
"""

from __future__ import annotations

import pytest

import tracefact
from tests.conftest import Spans
from tracefact import semconv
from tracefact.evaluators import EvalCase, EvalResult, EvaluatorDescription, ProviderError
from tracefact.evaluators.cascade import Cascade
from tracefact.instrument.capture import CaptureOptions, finish

KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
AWS = "AKIA" + "ABCDEFGHIJKLMNOP"


class Fixed:
    """Returns a result it then spoils as `spoil` says (after validation, as user code may)."""

    def __init__(self, name: str, spoil: str | None = None, error: Exception | None = None):
        self.name = name
        self.spoil = spoil
        self.error = error

    def describe(self) -> EvaluatorDescription:
        return EvaluatorDescription(name=self.name, evaluator=f"fixed-{self.name}")

    async def evaluate(self, case: EvalCase) -> EvalResult:
        if self.error is not None:
            raise self.error
        result = EvalResult(
            name=self.name, label="hallucinated", score=0.9, evaluator=f"fixed-{self.name}"
        )
        if self.spoil == "none-explanation":
            result.explanation = None  # type: ignore[assignment]
        elif self.spoil == "nan-score":
            result.score = float("nan")
        elif self.spoil == "nan-cost":  # one result's cost once failed a sink's whole batch
            result.cost_usd = float("nan")
        return result


@pytest.mark.parametrize("spoil", ["none-explanation", "nan-score", "nan-cost"])
def test_one_evaluators_bad_result_never_costs_anothers_valid_one(spans: Spans, spoil: str) -> None:
    spans.reconfigure(evaluators=[Fixed("good"), Fixed("bad", spoil)])

    @tracefact.llm
    def answer(question: str, contexts: list[str]) -> str:
        return "an answer"

    answer("q", ["c"])
    (span,) = spans.all()
    attributes = span.attributes or {}
    assert attributes[semconv.EVAL_STATUS] == semconv.STATUS_ERROR
    assert attributes["tracefact.eval.good.status"] == semconv.STATUS_OK
    assert attributes["tracefact.eval.good.score"] == 0.9
    assert attributes["tracefact.eval.bad.status"] == semconv.STATUS_ERROR
    assert "tracefact.eval.bad.score" not in attributes
    error = str(attributes[semconv.EVAL_ERROR])
    expected = {"nan-score": "score NaN", "nan-cost": "cost_usd", "none-explanation": "explanation"}
    assert expected[spoil] in error


def test_a_cascades_escalation_error_is_scrubbed(spans: Spans) -> None:
    judge = Fixed("hallucination", error=ProviderError(f"invalid key {KEY}", status_code=401))
    first = Fixed("hallucination")
    spans.reconfigure(evaluators=[Cascade(first, judge)])

    @tracefact.llm
    def answer(question: str, contexts: list[str]) -> str:
        return "an answer"

    answer("q", ["c"])
    (span,) = spans.all()
    attributes = span.attributes or {}
    escalation = str(attributes["tracefact.eval.hallucination.escalation_error"])
    assert "invalid key" in escalation
    assert KEY not in escalation and "[SCRUBBED]" in escalation


def test_contexts_tracefact_copies_from_a_retriever_are_scrubbed(spans: Spans) -> None:
    @tracefact.retriever
    def search(query: str) -> list[str]:
        return [f"use key {KEY} and {AWS}", "password=hunter2x"]

    @tracefact.llm
    def answer(question: str) -> str:
        return "an answer"

    @tracefact.chain
    def request() -> None:
        search("q")
        answer("q")

    request()
    (llm,) = [s for s in spans.all() if s.name.endswith("answer")]
    assert (llm.attributes or {}).get(semconv.CONTEXTS_SOURCE) is not None
    for span in spans.all():
        text = str(dict(span.attributes or {}))
        assert KEY not in text and AWS not in text and "hunter2x" not in text, span.name


def test_a_huge_text_is_cut_before_it_is_scrubbed() -> None:
    """What is scrubbed is what is kept, so the caller's cost does not grow with the size."""
    options = CaptureOptions(max_attribute_length=8192)
    head = "word " * 1000 + KEY
    huge = head + " secret=abcdef" * 4_000_000  # about 56 MB of secret-shaped text
    scrubbed: list[str] = []
    text = finish(huge, options, "output", scrubbed)
    assert text.startswith("word ") and KEY not in text and scrubbed == ["output"]
    assert text.endswith(semconv.TRUNCATION_MARKER.format(len(huge) - 8192))
    # A secret that straddles the limit is scrubbed before the cut, not left in part.
    edge = "x" * (8192 - 10) + " " + KEY + " tail" * 10_000
    assert KEY[:10] not in finish(edge, options, "output", [])
