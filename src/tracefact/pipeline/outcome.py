"""`Outcome`: what one evaluator made of one span, whatever happened.

Its own module so that retry, metrics and enrichment share the type without
depending on each other.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tracefact import semconv
from tracefact.evaluators.base import EvalResult
from tracefact.scrubbing import clean_text


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


def cleaned(outcome: Outcome) -> Outcome:
    """The outcome with the texts tracefact will write scrubbed and valid UTF-8.

    An explanation may quote the answer, an error the provider's message (with a key
    in it): both end up on spans and in sink payloads.
    """
    result = outcome.result
    if result is not None:
        result = result.model_copy(
            update={
                "explanation": clean_text(result.explanation),
                "unsupported": [clean_text(text) for text in result.unsupported],
            }
        )
    error = None if outcome.error is None else clean_text(outcome.error)
    return replace(outcome, result=result, error=error)
