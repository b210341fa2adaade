"""A judge's own litellm call never becomes a traced span that is evaluated in turn."""

from __future__ import annotations

import pytest

import tracefact
from tests.conftest import Spans
from tracefact.evaluators.base import EvalCase, EvalResult, EvaluatorDescription

litellm = pytest.importorskip("litellm")


class LiteLLMCallingJudge:
    name = "judge"

    def describe(self) -> EvaluatorDescription:
        return EvaluatorDescription(name=self.name, evaluator="litellm-calling", source="llm")

    async def evaluate(self, case: EvalCase) -> EvalResult:
        reply = await litellm.acompletion(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": case.output}],
            mock_response="factual",
        )
        return EvalResult(
            name=self.name,
            label=reply.choices[0].message.content,
            score=0.0,
            evaluator="mock-judge",
            annotator_kind="LLM",
        )


def test_judge_litellm_calls_are_not_traced(spans: Spans) -> None:
    spans.reconfigure(evaluators=[LiteLLMCallingJudge()])
    tracefact.instrument_litellm()
    try:

        @tracefact.llm(name="answer")
        def answer(question: str, contexts: list[str]) -> str:
            return "grounded answer"

        answer("q", ["ctx"])
        exported = spans.all()
    finally:
        tracefact.uninstrument_litellm()
    assert [s.name for s in exported] == ["answer"]
    assert exported[0].attributes["tracefact.eval.judge.label"] == "factual"
