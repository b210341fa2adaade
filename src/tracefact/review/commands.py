"""`tracefact review` and `tracefact labels`: what they do, apart from parsing arguments."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tracefact import semconv
from tracefact.monitor.spans import JudgedSpan, read_judged
from tracefact.review import phoenix
from tracefact.review.ledger import DEFAULT_WINDOW_SECONDS, Label, Ledger, read_labels
from tracefact.review.spans import Export, add_spans, review_records
from tracefact.spans_file import SpansFileReader


@dataclass(frozen=True)
class PhoenixTarget:
    """Where reviewers label: a Phoenix, its project, the annotation name they use."""

    endpoint: str
    project: str = "default"
    annotation_name: str = semconv.REVIEW_ANNOTATION_NAME
    api_key: str | None = None


def judged(spans_file: Path) -> list[JudgedSpan]:
    """The evaluated spans of a spans file (OSError when it cannot be read)."""
    return read_judged(SpansFileReader(spans_file)).judged


def export(spans_file: Path, out: Path, target: PhoenixTarget | None = None) -> Export:
    """Write the selected spans as JSONL to `out`; with `target`, ready Phoenix for review."""
    if out.exists() and spans_file.exists() and out.samefile(spans_file):
        raise ValueError(f"--out {out} is the spans file itself: write the review elsewhere")
    summary = Export()
    # Read before `out` is opened: a spans file that cannot be read leaves it as it was.
    records = list(review_records(judged(spans_file), summary))
    with out.open("w", encoding="utf-8") as lines:
        for record in records:
            lines.write(json.dumps(record, ensure_ascii=False) + "\n")
    if target is not None:
        with phoenix.client(target.endpoint, target.api_key) as http:
            phoenix.ensure_annotation_config(http, target.annotation_name)
            phoenix.assign_to_project(http, target.project, target.annotation_name)
    return summary


@dataclass
class Loaded:
    """A ledger of a spans file's selections and the labels found for them."""

    ledger: Ledger
    selections: int = 0
    labels: int = 0
    errors: list[str] = field(default_factory=list)
    """Lines of the labels files that were not labels."""
    polled: list[Label] = field(default_factory=list)
    """Labels read from Phoenix."""


def load(
    spans_file: Path,
    labels_files: Sequence[Path] = (),
    target: PhoenixTarget | None = None,
    *,
    window_seconds: float = DEFAULT_WINDOW_SECONDS,
    min_labels: int = 30,
    min_share: float = 0.05,
    target_half_width: float = 0.02,
) -> Loaded:
    """Selections from the spans, labels from files and, with `target`, from Phoenix."""
    ledger = Ledger(window_seconds, min_labels, min_share, target_half_width)
    loaded = Loaded(ledger, selections=add_spans(ledger, judged(spans_file)))
    for path in labels_files:
        labels, errors = read_labels(path)
        ledger.add_labels(labels)
        loaded.labels += len(labels)
        loaded.errors.extend(errors)
    if target is not None:
        with phoenix.client(target.endpoint, target.api_key) as http:
            loaded.polled = phoenix.poll_labels(
                http, target.project, ledger.selected_ids, target.annotation_name
            )
        ledger.add_labels(loaded.polled)
        loaded.labels += len(loaded.polled)
    return loaded


def write_labels(path: Path, labels: Sequence[Label]) -> None:
    """Append labels as JSONL (what `tracefact labels` reads back)."""
    with path.open("a", encoding="utf-8") as lines:
        for label in labels:
            item = {
                "trace_id": label.trace_id,
                "span_id": label.span_id,
                "label": label.label,
                "reviewer": label.reviewer,
                "time": label.time,
            }
            lines.write(json.dumps(item) + "\n")
