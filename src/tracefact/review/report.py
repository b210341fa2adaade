"""The review section of `tracefact report`: the evaluator against people, and over time."""

from __future__ import annotations

from dataclasses import dataclass

from tracefact.review.ledger import Ledger, ReviewEstimate

STEPS = 12
"""Points of the corrected rate over time, each over the review window ending there."""


@dataclass(frozen=True, slots=True)
class ReviewReport:
    labels_source: str
    """Where the labels came from (files, a Phoenix)."""
    selections: int
    """Evaluated spans carrying a review selection."""
    labels_read: int
    estimates: list[ReviewEstimate]
    """Per evaluator (and group) over the window ending at the newest span."""
    over_time: list[ReviewEstimate]
    """Per evaluator, all groups together, over windows ending at `STEPS` points (a point
    whose figures are the previous one's is left out)."""
    window_seconds: float


def review_report(
    ledger: Ledger, start: float, end: float, labels_source: str, selections: int, labels: int
) -> ReviewReport:
    """The section's figures from a ledger holding the file's selections and labels."""
    points = (
        [start + (end - start) * (i + 1) / STEPS for i in range(STEPS)] if end > start else [end]
    )
    over_time: list[ReviewEstimate] = []
    last: dict[str, tuple[object, ...]] = {}
    for now in points:
        for e in ledger.estimates(now):
            figures = (e.corrected.rate, e.corrected.lower, e.corrected.upper, e.corrected.labels)
            if not e.group and last.get(e.evaluator) != figures:  # a new figure: a new row
                over_time.append(e)
                last[e.evaluator] = figures
    return ReviewReport(
        labels_source,
        selections,
        labels,
        ledger.estimates(end),
        over_time,
        ledger.window_seconds,
    )
