"""How well an evaluator agrees with gold labels: a confusion matrix and its summary figures.

The positive class is "hallucinated". Balanced accuracy is the headline figure because
labelled sets are often skewed and a detector that says "factual" to everything should
score 0.5, not the share of factual answers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


def _ratio(numerator: int, denominator: int) -> float:
    """0.0 where the figure is undefined (no positives predicted, none present)."""
    return numerator / denominator if denominator else 0.0


@dataclass(frozen=True)
class Confusion:
    """Counts of (gold, predicted) pairs, hallucinated being positive."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @classmethod
    def of(cls, pairs: Iterable[tuple[bool, bool]]) -> Confusion:
        """From ``(gold_hallucinated, predicted_hallucinated)`` pairs."""
        counts = {(True, True): 0, (False, True): 0, (True, False): 0, (False, False): 0}
        for gold, predicted in pairs:
            counts[(bool(gold), bool(predicted))] += 1
        return cls(
            counts[True, True], counts[False, True], counts[True, False], counts[False, False]
        )

    def __add__(self, other: Confusion) -> Confusion:
        return Confusion(
            self.tp + other.tp, self.fp + other.fp, self.fn + other.fn, self.tn + other.tn
        )

    @property
    def total(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def precision(self) -> float:
        return _ratio(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float:
        return _ratio(self.tp, self.tp + self.fn)

    @property
    def specificity(self) -> float:
        return _ratio(self.tn, self.tn + self.fp)

    @property
    def f1(self) -> float:
        return _ratio(2 * self.tp, 2 * self.tp + self.fp + self.fn)

    @property
    def accuracy(self) -> float:
        return _ratio(self.tp + self.tn, self.total)

    @property
    def balanced_accuracy(self) -> float:
        """Mean recall over the classes present (so one-class sets are not scored 0.5 free)."""
        recalls = []
        if self.tp + self.fn:
            recalls.append(self.recall)
        if self.tn + self.fp:
            recalls.append(self.specificity)
        return sum(recalls) / len(recalls) if recalls else 0.0

    def summary(self) -> dict[str, float | int]:
        return {
            "n": self.total,
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "balanced_accuracy": self.balanced_accuracy,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "tn": self.tn,
        }


def by_group(rows: Iterable[tuple[str, bool, bool]]) -> dict[str, Confusion]:
    """One confusion matrix per group (for example per task) from (group, gold, predicted)."""
    groups: dict[str, list[tuple[bool, bool]]] = {}
    for group, gold, predicted in rows:
        groups.setdefault(group, []).append((gold, predicted))
    return {group: Confusion.of(pairs) for group, pairs in sorted(groups.items())}
