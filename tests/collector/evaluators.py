"""Evaluators the collector imports by path in tests (`import: tests.collector.evaluators:slow`)."""

from __future__ import annotations

import asyncio

from tracefact.evaluators.base import EvalCase, EvalResult
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
