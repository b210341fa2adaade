"""An evaluator that only waits: evaluation time without CPU, for crash tests and scaling.

Configured as `{import: tests.collector.queues.waiting:WaitingEvaluator, kwargs: {seconds: 2}}`
in a collector's or worker's YAML (run from the repository root).
"""

from __future__ import annotations

import asyncio

from tracefact.evaluators.base import EvalCase, EvalResult, EvaluatorDescription


class WaitingEvaluator:
    """Answers `factual` after `seconds`; its explanation says how many contexts it had."""

    name = "hallucination"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def describe(self) -> EvaluatorDescription:
        return EvaluatorDescription(name=self.name, evaluator=f"wait-{self.seconds:g}s")

    async def evaluate(self, case: EvalCase) -> EvalResult:
        await asyncio.sleep(self.seconds)
        return EvalResult(
            name=self.name,
            label="factual",
            score=0.0,
            explanation=f"{len(case.contexts)} contexts",
            evaluator=f"wait-{self.seconds:g}s",
        )
