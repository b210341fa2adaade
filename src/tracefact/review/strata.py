"""A review stratum: the group a span belongs to and the evaluator's verdict on it.

Its own module so that the pipeline, which decides selections, imports nothing of the
estimators.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class Stratum:
    """A review stratum: the group's values (joined) and the evaluator's verdict."""

    group: str
    verdict: str
    """hallucinated | factual | none (no verdict: error, timeout, ...)."""

    def __str__(self) -> str:
        return f"{self.group}/{self.verdict}" if self.group else self.verdict

    @classmethod
    def parse(cls, text: str) -> Stratum:
        """The stratum a span's `tracefact.review.stratum` names."""
        group, _, verdict = text.rpartition("/")
        return cls(group, verdict)
