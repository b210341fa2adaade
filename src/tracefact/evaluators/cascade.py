"""`Cascade`: a cheap evaluator first, an expensive one only where the cheap one is unsure.

Most answers are clearly grounded or clearly not; paying a judge for those is waste.
The first evaluator's result stands unless its score falls in the uncertain band (or
it flagged a hallucination, which is worth a second opinion), in which case the second
evaluator decides. The first evaluator failing for good (a case too large for the local
model, a reply in the wrong format) is the most doubtful result of all, so the second
decides then too; a transient failure is raised for the caller's retry policy, since
retrying the cheap evaluator costs less than escalating. The result says which ran and
what the whole thing cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tracefact.evaluators.base import (
    HALLUCINATED,
    EvalCase,
    EvalResult,
    EvaluationError,
    Evaluator,
    EvaluatorDescription,
)

Escalation = tuple[float, float] | Callable[[EvalResult], bool]


class Cascade:
    """Runs `first`; runs `then` too when `escalate` says so, and returns the later verdict.

    ``escalate`` is a ``(low, high)`` band of first scores considered uncertain
    (inclusive), or a predicate on the first result. With a band, a first result
    labelled hallucinated escalates as well unless ``escalate_flagged=False``.
    """

    def __init__(
        self,
        first: Evaluator,
        then: Evaluator,
        escalate: Escalation = (0.2, 0.8),
        escalate_flagged: bool = True,
        name: str | None = None,
    ) -> None:
        if isinstance(escalate, tuple):
            low, high = escalate
            if not 0.0 <= low <= high <= 1.0:
                raise ValueError(f"escalation band must satisfy 0 <= low <= high <= 1: {escalate}")
        elif not callable(escalate):
            raise TypeError("escalate must be a (low, high) band or a predicate")
        self.first = first
        self.then = then
        self.escalate = escalate
        self.escalate_flagged = escalate_flagged
        self.name = name or first.name

    def should_escalate(self, result: EvalResult) -> bool:
        if callable(self.escalate):
            return self.escalate(result)
        low, high = self.escalate
        flagged = self.escalate_flagged and result.label == HALLUCINATED
        return flagged or low <= result.score <= high

    def describe(self) -> EvaluatorDescription:
        if callable(self.escalate):
            rule: Any = getattr(self.escalate, "__qualname__", repr(self.escalate))
        else:
            rule = {"band": list(self.escalate), "flagged": self.escalate_flagged}
        return EvaluatorDescription(
            name=self.name,
            evaluator="cascade",
            settings={
                "first": self.first.describe().model_dump(mode="json"),
                "then": self.then.describe().model_dump(mode="json"),
                "escalate": rule,
            },
        )

    async def evaluate(self, case: EvalCase) -> EvalResult:
        started = time.perf_counter()
        try:
            first = await self.first.evaluate(case)
        except EvaluationError as error:
            if error.transient:
                raise
            failed = {"error": f"{type(error).__name__}: {error}"}
            tag = self.first.describe().evaluator
            return await self._escalated(case, started, tag, error.cost_usd, failed)
        if not self.should_escalate(first):
            return first.model_copy(
                update={
                    "name": self.name,
                    "raw": {**first.raw, "cascade": {"ran": [first.evaluator], "escalated": False}},
                }
            )
        summary = {"label": first.label, "score": first.score, "explanation": first.explanation}
        return await self._escalated(case, started, first.evaluator, first.cost_usd, summary)

    async def _escalated(
        self,
        case: EvalCase,
        started: float,
        first_evaluator: str,
        first_cost: float | None,
        first_summary: dict[str, Any],
    ) -> EvalResult:
        final = await self.then.evaluate(case)
        costs = [c for c in (first_cost, final.cost_usd) if c is not None]
        return final.model_copy(
            update={
                "name": self.name,
                "evaluator": f"cascade({first_evaluator} -> {final.evaluator})",
                "latency_ms": (time.perf_counter() - started) * 1000,
                "cost_usd": sum(costs) if costs else None,
                "raw": {
                    **final.raw,
                    "cascade": {
                        "ran": [first_evaluator, final.evaluator],
                        "escalated": True,
                        "first": first_summary,
                    },
                },
            }
        )
