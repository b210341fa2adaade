"""The one place selections and human labels meet: the corrected rate per evaluator, per window.

Evaluated spans are kept as sums per (evaluator, stratum, hour of their end time), so a
week of traffic costs a few numbers per stratum; selected spans are kept one by one (the
label budget bounds them), and labels by span id. A label counts in its span's window
however late it comes, so a late label revises past windows. Labels are `hallucinated`,
`factual` or `unsure`; a span labelled by several reviewers takes their majority (a tie
is unsure, so pending), and their disagreement on doubly labelled spans is reported and
measures (and corrects for) the reviewers' own error. A label for a span that was not
selected is kept and counted, never used for the estimate.

`tracefact report` and `tracefact labels` build one from a spans file and a labels file;
it holds nothing a restart would lose that those files do not.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracefact import semconv
from tracefact.review.estimate import Corrected, StratumTotals, corrected
from tracefact.review.strata import Stratum

HOUR = 3600.0
DEFAULT_WINDOW_SECONDS = 7 * 24 * HOUR


@dataclass(frozen=True, slots=True)
class Label:
    """One reviewer's label on one span."""

    trace_id: str
    """32 hex digits."""
    span_id: str
    """16 hex digits."""
    label: str
    """hallucinated | factual | unsure"""
    reviewer: str = ""
    time: float = 0.0
    """Unix seconds: when it was given (the latest of a reviewer's labels wins)."""


@dataclass(frozen=True, slots=True)
class Selection:
    """An evaluated span's review record, as it carries it (`tracefact.review.*`)."""

    trace_id: str
    span_id: str
    evaluator: str
    stratum: Stratum
    probability: float
    weight: float
    """1 / its evaluation sample rate."""
    selected: bool
    time: float
    """Unix seconds: when the span ended."""
    second_reviewer: bool = False
    """Selected for a second reviewer's label too."""


def selection_of(
    trace_id: str, span_id: str, attributes: Mapping[str, Any], time: float
) -> Selection | None:
    """The span's review record, or None for a span without one (or with a broken one)."""
    stratum = attributes.get(semconv.REVIEW_STRATUM)
    probability = attributes.get(semconv.REVIEW_PROBABILITY)
    rate = attributes.get(semconv.EVAL_SAMPLE_RATE)
    evaluator = attributes.get(semconv.REVIEW_EVALUATOR, semconv.EVALUATOR_UNKNOWN)
    if not isinstance(stratum, str) or not _number(probability) or not _number(rate):
        return None
    assert isinstance(probability, int | float) and isinstance(rate, int | float)
    if not (0.0 <= probability <= 1.0 and 0.0 < rate <= 1.0):
        return None
    version = attributes.get(semconv.eval_attribute(str(evaluator), "evaluator"))
    name = f"{evaluator} ({version})" if isinstance(version, str) and version else str(evaluator)
    return Selection(
        trace_id,
        span_id,
        name,
        Stratum.parse(stratum),
        float(probability),
        1.0 / rate,
        attributes.get(semconv.REVIEW_SELECTED) is True,
        time,
        attributes.get(semconv.REVIEW_SECOND_REVIEWER) is True,
    )


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def parse_label(item: object) -> Label:
    """A label from one JSON object; ValueError saying what is wrong."""
    if not isinstance(item, dict):
        raise ValueError("not a JSON object")
    trace_id, span_id = item.get("trace_id"), item.get("span_id")
    if not isinstance(span_id, str) or len(span_id) != 16 or not _hex(span_id):
        raise ValueError("span_id must be 16 hex digits")
    if not isinstance(trace_id, str) or len(trace_id) != 32 or not _hex(trace_id):
        raise ValueError("trace_id must be 32 hex digits")
    label = item.get("label")
    if label not in semconv.REVIEW_LABELS:
        raise ValueError(f"label must be one of {', '.join(semconv.REVIEW_LABELS)}, not {label!r}")
    reviewer = item.get("reviewer", "")
    when = item.get("time", 0.0)
    if not isinstance(reviewer, str):
        raise ValueError("reviewer must be text")
    if not _number(when):
        raise ValueError("time must be unix seconds")
    return Label(trace_id.lower(), span_id.lower(), str(label), reviewer, float(when))


def _hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)


def read_labels(path: Path) -> tuple[list[Label], list[str]]:
    """The labels of a JSONL file, and a line's reason for each line that is not one.

    A line that is not UTF-8 is such a line, not a failure of the file.
    """
    labels, errors = [], []
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                labels.append(parse_label(json.loads(line)))
            except ValueError as exc:  # JSONDecodeError is one
                errors.append(f"{path}:{number}: {exc}")
    return labels, errors


@dataclass(frozen=True, slots=True)
class Agreement:
    """How often reviewers agree on the spans more than one of them labelled."""

    spans: int
    """Spans with two or more decided labels."""
    rate: float | None
    """Share of agreeing pairs among them."""


@dataclass(frozen=True, slots=True)
class ReviewEstimate:
    """One evaluator's corrected rate over the window ending at `window_end`."""

    evaluator: str
    group: str
    """The strata's group ('' for all groups together)."""
    window_end: float
    corrected: Corrected
    agreement: Agreement
    unselected_labels: int
    """Labels for spans that were not selected: kept, counted, never used."""


@dataclass(slots=True)
class _Labelled:
    """A span's labels by reviewer (the latest of each)."""

    by_reviewer: dict[str, Label] = field(default_factory=dict)

    def add(self, label: Label) -> None:
        old = self.by_reviewer.get(label.reviewer)
        if old is None or label.time >= old.time:
            self.by_reviewer[label.reviewer] = label

    def majority(self) -> tuple[bool, int] | None:
        """(hallucinated, how many decided labels) by majority; None for a tie or no label."""
        decided = [
            label.label == semconv.REVIEW_VERDICT_HALLUCINATED
            for label in self.by_reviewer.values()
            if label.label != semconv.REVIEW_LABEL_UNSURE
        ]
        said = sum(decided)
        if not decided or 2 * said == len(decided):
            return None
        return 2 * said > len(decided), len(decided)

    def pairs(self) -> tuple[int, int]:
        """(agreeing pairs, pairs) among the decided labels."""
        decided = [
            label.label
            for label in self.by_reviewer.values()
            if label.label != semconv.REVIEW_LABEL_UNSURE
        ]
        pairs = len(decided) * (len(decided) - 1) // 2
        counts = Counter(decided)
        return sum(n * (n - 1) // 2 for n in counts.values()), pairs


class Ledger:
    """Selections and labels; the corrected rate over any window. Thread-safe."""

    def __init__(
        self,
        window_seconds: float = DEFAULT_WINDOW_SECONDS,
        min_labels: int = 30,
        min_share: float = 0.05,
        target_half_width: float = 0.02,
        confidence: float = 0.95,
    ) -> None:
        if window_seconds <= 0:
            raise ValueError(f"window_seconds must be positive, not {window_seconds}")
        self.window_seconds = window_seconds
        self.min_labels = min_labels
        self.min_share = min_share
        self.target_half_width = target_half_width
        self.confidence = confidence
        # One lock: spans come from the evaluation loop, labels from a poller, estimates
        # from a metrics reader; every step is a few sums.
        self._lock = threading.Lock()
        self._hours: dict[tuple[str, Stratum, int], StratumTotals] = {}
        self._selected: dict[str, Selection] = {}
        self._labels: dict[str, _Labelled] = {}
        self._newest = -math.inf

    @property
    def selected_ids(self) -> list[tuple[str, str]]:
        """(trace id, span id) of every selected span, for a poller of labels."""
        with self._lock:
            return [(s.trace_id, s.span_id) for s in self._selected.values()]

    @property
    def newest(self) -> float | None:
        """The end time of the newest evaluated span seen."""
        return None if self._newest == -math.inf else self._newest

    def add_selection(self, selection: Selection) -> None:
        """Count an evaluated span (once per span: the caller sees each span once)."""
        hour = math.floor(selection.time / HOUR)
        with self._lock:
            self._newest = max(self._newest, selection.time)
            key = (selection.evaluator, selection.stratum, hour)
            self._hours.setdefault(key, StratumTotals()).add_evaluated(
                selection.weight, probability=selection.probability
            )
            if selection.selected:
                self._selected[selection.span_id] = selection

    def add_label(self, label: Label) -> None:
        with self._lock:
            self._labels.setdefault(label.span_id, _Labelled()).add(label)

    def add_labels(self, labels: Iterable[Label]) -> None:
        for label in labels:
            self.add_label(label)

    def estimates(self, now: float | None = None) -> list[ReviewEstimate]:
        """Per evaluator (and per group where strata have one), over the window ending `now`.

        `now` defaults to the newest span's end time.
        """
        with self._lock:
            end = self._newest if now is None else now
            if end == -math.inf:
                return []
            start = end - self.window_seconds
            first, last = math.floor(start / HOUR), math.floor(end / HOUR)
            totals: dict[str, dict[Stratum, StratumTotals]] = {}
            for (evaluator, stratum, hour), sums in self._hours.items():
                # whole hours: the window is rounded to the hour its ends fall in
                if first < hour <= last:
                    strata = totals.setdefault(evaluator, {})
                    strata.setdefault(stratum, StratumTotals()).merge(sums)
            agree: dict[str, int] = {}
            pairs: dict[str, int] = {}
            doubled: dict[str, int] = {}
            for selection in self._selected.values():
                hour = math.floor(selection.time / HOUR)
                if not first < hour <= last or selection.evaluator not in totals:
                    continue
                t = totals[selection.evaluator].setdefault(selection.stratum, StratumTotals())
                t.add_selected()
                labelled = self._labels.get(selection.span_id)
                if labelled is None:
                    continue
                majority = labelled.majority()
                if majority is not None:
                    hallucinated, reviewers = majority
                    t.add_label(
                        selection.weight, selection.probability, hallucinated, reviewers=reviewers
                    )
                a, p = labelled.pairs()
                t.add_pairs(p, p - a)
                name = selection.evaluator
                agree[name], pairs[name] = agree.get(name, 0) + a, pairs.get(name, 0) + p
                doubled[name] = doubled.get(name, 0) + (p > 0)
            unselected = sum(1 for span_id in self._labels if span_id not in self._selected)
        out = []
        for evaluator, strata in sorted(totals.items()):
            agreement = Agreement(
                doubled.get(evaluator, 0),
                agree[evaluator] / pairs[evaluator] if pairs.get(evaluator) else None,
            )
            groups = sorted({s.group for s in strata})
            for group in ["", *groups] if groups != [""] else [""]:
                chosen = {s: t for s, t in strata.items() if not group or s.group == group}
                out.append(
                    ReviewEstimate(
                        evaluator,
                        group,
                        end,
                        corrected(
                            chosen,
                            self.confidence,
                            self.min_labels,
                            self.min_share,
                            self.target_half_width,
                        ),
                        agreement,
                        unselected,
                    )
                )
        return out
