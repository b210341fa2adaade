"""Evaluators the collector imports by path in tests (`import: tests.collector.evaluators:slow`)."""

from __future__ import annotations

import asyncio

from tracefact.evaluators.base import EvalCase, EvalResult, EvaluatorDescription
from tracefact.evaluators.lexical import LexicalOverlap


class Slow(LexicalOverlap):
    """The lexical evaluator after a wait: holds its evaluation slot for `seconds`."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    async def evaluate(self, case: EvalCase) -> EvalResult:
        await asyncio.sleep(self.seconds)
        return await super().evaluate(case)


def slow(seconds: float) -> Slow:
    return Slow(seconds)


class Gated:
    """Labels a case as its answer says (``"round 3: hallucinated"``) once its round opens.

    An evaluation of a span sent in round `r` ends only after the test called
    `open_round(r)`: an evaluator exactly as slow as the test makes it, in-process.
    """

    name = "hallucination"
    opened = -1

    def describe(self) -> EvaluatorDescription:
        return EvaluatorDescription(name=self.name, evaluator="tests/gated")

    async def evaluate(self, case: EvalCase) -> EvalResult:
        head, _, label = case.output.partition(": ")
        while Gated.opened < int(head.removeprefix("round ")):
            await asyncio.sleep(0.001)  # polls the gate; the test orders nothing by time
        return EvalResult(
            name=self.name,
            label="hallucinated" if label == "hallucinated" else "factual",
            score=1.0 if label == "hallucinated" else 0.0,
            evaluator="tests/gated",
        )


def open_round(index: int) -> None:
    Gated.opened = index


def gated() -> Gated:
    Gated.opened = -1
    return Gated()
