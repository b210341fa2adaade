"""`Outcome`: what one evaluator made of one span, whatever happened.

Its own module so that retry, metrics and enrichment share the type without
depending on each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracefact import semconv
from tracefact.evaluators.base import EvalResult


@dataclass(frozen=True, slots=True)
class Outcome:
    """One evaluator's result on one span, or why there is none."""

    evaluator: str
    status: semconv.EvalStatus
    """ok | error | timeout"""
    result: EvalResult | None = None
    error: str | None = None
    latency_ms: float = 0.0
    spent_usd: float | None = None
    """What a failed evaluation still cost; a result carries its own cost."""

    @property
    def cost_usd(self) -> float | None:
        """What the evaluation cost, whether or not it gave a result."""
        return self.result.cost_usd if self.result is not None else self.spent_usd
