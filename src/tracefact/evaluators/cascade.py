"""`Cascade`: a cheap evaluator first, an expensive one only where the cheap one is unsure.

Most answers are clearly grounded or clearly not; paying a judge for those is waste.
The first evaluator's result stands unless its score falls in the uncertain band (or
it flagged a hallucination, which is worth a second opinion), in which case the second
evaluator decides. The first evaluator failing for good (a case too large for the local
model, a reply in the wrong format) is the most doubtful result of all, so the second
decides then too; a transient failure is raised for the caller's retry policy, since
retrying the cheap evaluator costs less than escalating. The result says which ran and
what the whole thing cost.

The second evaluator failing never throws away the first verdict. A permanent failure
(no API key, a reply in the wrong format) returns the first result, marked as not
escalated, with the reason in ``raw["cascade"]["escalation_error"]`` (exported as
`tracefact.eval.<name>.escalation_error`). A transient one (a rate limit) is raised so
the pipeline retries the whole cascade, carrying that same result as the error's
`fallback`, which the pipeline keeps if its retries run out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tracefact import semconv
from tracefact._retry import is_transient
from tracefact.evaluators.base import (
    HALLUCINATED,
    EvalCase,
    EvalResult,
    EvaluationError,
    Evaluator,
    EvaluatorDescription,
)

Escalation = tuple[float, float] | Callable[[EvalResult], bool]


class EscalationError(EvaluationError):
    """The second evaluator failed transiently; `fallback` is the first verdict to keep."""

    transient = True

    def __init__(self, message: str, fallback: EvalResult) -> None:
        super().__init__(f"escalation failed: {message}")
        self.fallback = fallback
        self.cost_usd = fallback.cost_usd


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
            return self._kept(first)
        summary = {"label": first.label, "score": first.score, "explanation": first.explanation}
        try:
            return await self._escalated(case, started, first.evaluator, first.cost_usd, summary)
        except Exception as error:
            reason = f"{type(error).__name__}: {error}"
            spent = getattr(error, "cost_usd", None)
            kept = self._kept(first, escalation_error=reason, spent=spent)
            if not is_transient(error):
                return kept
            raise EscalationError(reason, fallback=kept) from error

    def _kept(
        self, first: EvalResult, escalation_error: str | None = None, spent: float | None = None
    ) -> EvalResult:
        """`first` as the cascade's result, not escalated (and why, when escalating failed)."""
        cascade: dict[str, Any] = {"ran": [first.evaluator], "escalated": False}
        if escalation_error is not None:
            cascade[semconv.EVAL_FIELD_ESCALATION_ERROR] = escalation_error
        costs = [c for c in (first.cost_usd, spent) if c is not None]
        return first.model_copy(
            update={
                "name": self.name,
                "cost_usd": sum(costs) if costs else None,
                "raw": {**first.raw, "cascade": cascade},
            }
        )

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
