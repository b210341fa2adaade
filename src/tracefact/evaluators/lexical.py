"""`LexicalOverlap`: a deterministic, dependency-free baseline.

Score = share of the answer's content words that appear neither in the contexts nor
in the question. Cheap and explainable (it names the sentences whose words are
missing), but blind to meaning: a negation or a swapped name built from words that
occur in the context passes. Use it as a floor, not a verdict.
"""

from __future__ import annotations

import time

from tracefact.evaluators._text import content_words, split_sentences
from tracefact.evaluators.base import (
    FACTUAL,
    HALLUCINATED,
    EvalCase,
    EvalResult,
    EvaluatorDescription,
    InvalidCaseError,
)

__all__ = ["LexicalOverlap", "content_words", "split_sentences"]
"""`content_words` and `split_sentences` are the units this evaluator counts in."""


class LexicalOverlap:
    """Hallucination score from missing content words; the offline fallback evaluator."""

    def __init__(self, threshold: float = 0.15, name: str = "hallucination") -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be within (0, 1], got {threshold}")
        self.name = name
        self.threshold = threshold

    def describe(self) -> EvaluatorDescription:
        return EvaluatorDescription(
            name=self.name, evaluator="lexical-overlap", settings={"threshold": self.threshold}
        )

    async def evaluate(self, case: EvalCase) -> EvalResult:
        return self.evaluate_sync(case)

    def evaluate_sync(self, case: EvalCase) -> EvalResult:
        started = time.perf_counter()
        if not case.contexts:
            raise InvalidCaseError("LexicalOverlap needs at least one context")
        known = set(content_words(case.input))
        for context in case.contexts:
            known.update(content_words(context))
        missing = total = 0
        unsupported: list[str] = []
        for sentence in split_sentences(case.output):
            words = content_words(sentence)
            absent = [w for w in words if w not in known]
            missing += len(absent)
            total += len(words)
            if words and len(absent) / len(words) > self.threshold:
                unsupported.append(sentence)
        score = missing / total if total else 0.0
        hallucinated = score > self.threshold
        if unsupported:
            explanation = f"{missing} of {total} content words are not in the contexts; " + (
                "unsupported: " + " | ".join(f'"{s}"' for s in unsupported)
            )
        else:
            explanation = f"{total - missing} of {total} content words appear in the contexts."
        return EvalResult(
            name=self.name,
            label=HALLUCINATED if hallucinated else FACTUAL,
            score=score,
            explanation=explanation,
            unsupported=unsupported,
            evaluator=f"lexical-overlap(threshold={self.threshold})",
            latency_ms=(time.perf_counter() - started) * 1000,
            cost_usd=0.0,
            annotator_kind="CODE",
            raw={"missing_words": missing, "content_words": total},
        )
