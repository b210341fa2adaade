"""Review records out of exported spans: the ledger's selections and the reviewers' JSONL.

A selected span is exported with what it already carries (question, contexts, answer,
the evaluator's verdict, its ids and its selection record), through the one span reader;
nothing is fetched from elsewhere. Its text was scrubbed when it was recorded and is
scrubbed again here, as everything tracefact writes. A span recorded with content capture
off holds no text to review: it is counted, and said to be unreviewable.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from tracefact import semconv
from tracefact.conventions import read_case
from tracefact.conventions.results import read_results
from tracefact.monitor.spans import JudgedSpan
from tracefact.review.ledger import Ledger, Selection, selection_of
from tracefact.scrubbing import clean_text


def selection(span: JudgedSpan) -> Selection | None:
    """The span's review record (None: not evaluated with review on)."""
    trace_id, span_id = span.key
    return selection_of(f"{trace_id:032x}", f"{span_id:016x}", span.attributes, span.time)


def add_spans(ledger: Ledger, spans: Iterable[JudgedSpan]) -> int:
    """Count every evaluated span's selection in `ledger`; how many carried one."""
    found = 0
    for span in spans:
        record = selection(span)
        if record is not None:
            ledger.add_selection(record)
            found += 1
    return found


@dataclass
class Export:
    """What `review_records` made of the spans it was given."""

    selected: int = 0
    written: int = 0
    unreviewable: int = 0
    """Selected spans with no text (content capture off, or no answer)."""
    capture_off: int = 0
    """LLM spans not evaluated because content capture was off: nothing to review."""


def review_records(spans: Iterable[JudgedSpan], summary: Export) -> Iterator[dict[str, Any]]:
    """One JSON-ready record per selected span that holds text to review."""
    for span in spans:
        if span.attributes.get(semconv.EVAL_SKIP_REASON) == semconv.SKIP_CAPTURE_OFF:
            summary.capture_off += 1
        record = selection(span)
        if record is None or not record.selected:
            continue
        summary.selected += 1
        reading = read_case(span.attributes)
        if reading.case is None:
            summary.unreviewable += 1
            continue
        case = reading.case
        summary.written += 1
        yield {
            "trace_id": record.trace_id,
            "span_id": record.span_id,
            "end_time": record.time,
            "question": clean_text(case.input),
            "contexts": [clean_text(c) for c in case.contexts],
            "answer": clean_text(case.output),
            "verdicts": _verdicts(span.attributes),
            "selection": {
                "evaluator": record.evaluator,
                "stratum": str(record.stratum),
                "probability": record.probability,
                "sample_rate": 1.0 / record.weight,
                "second_reviewer": record.second_reviewer,
            },
            "label": None,
        }


def _verdicts(attributes: dict[str, Any] | Any) -> dict[str, dict[str, Any]]:
    results = read_results(attributes)
    if results is None:
        return {}
    return {
        name: {
            "status": result.status,
            "label": result.label,
            "score": result.score,
            "explanation": clean_text(result.explanation) if result.explanation else None,
        }
        for name, result in results.evaluators.items()
    }


CAPTURE_OFF = (
    "{count} spans hold no text to review (content capture off): they cannot be reviewed; "
    "turn capture_content on for the spans you want labelled"
)
