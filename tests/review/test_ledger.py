"""The ledger: selections and labels joined by span id, reviewers reduced to one label."""

from __future__ import annotations

from typing import Any

import pytest

from tests.review.fake_phoenix import FakePhoenix, human
from tracefact.review import phoenix
from tracefact.review.estimate import Stratum
from tracefact.review.ledger import HOUR, Label, Ledger, Selection, parse_label

TRACE = "0" * 31 + "1"
F = Stratum("", "factual")


def span_id(i: int) -> str:
    return f"{i:016x}"


def fill(ledger: Ledger, count: int, time: float = 10 * HOUR) -> None:
    for i in range(count):
        ledger.add_selection(Selection(TRACE, span_id(i), "judge", F, 1.0, 1.0, True, time))


def only(ledger: Ledger, now: float | None = None) -> Any:
    (estimate,) = ledger.estimates(now)
    return estimate


def test_several_reviewers_give_a_span_their_majority_a_tie_stays_pending() -> None:
    ledger = Ledger(min_labels=1)
    fill(ledger, 4)
    votes = {
        0: ["hallucinated", "hallucinated", "factual"],  # hallucinated by majority
        1: ["hallucinated", "factual"],  # a tie: unsure, pending
        2: ["unsure"],  # pending
        3: ["factual", "factual", "unsure"],  # factual
    }
    for i, labels in votes.items():
        for n, label in enumerate(labels):
            ledger.add_label(Label(TRACE, span_id(i), label, f"r{n}", 1.0))
    estimate = only(ledger)
    assert (estimate.corrected.labels, estimate.corrected.pending) == (2, 2)
    # agreeing pairs: span 0 has 1 of 3, span 1 has 0 of 1, span 3 has 1 of 1
    assert estimate.agreement.spans == 3
    assert estimate.agreement.rate == pytest.approx(2 / 5)
    # 3 of 5 pairs apart: reviewers no better than chance, so the labels say nothing
    error = estimate.corrected.reviewer_error
    assert error.value == pytest.approx(0.5)
    assert (estimate.corrected.lower, estimate.corrected.upper) == (0.0, 1.0)


def test_reviewers_who_agree_give_the_rate_of_their_majority() -> None:
    ledger = Ledger(min_labels=1)
    fill(ledger, 21)
    for i in range(21):
        one = "hallucinated" if i < 5 else "factual"
        said = ["hallucinated", "factual"] if i == 20 else [one, one]
        for n, label in enumerate(said):
            ledger.add_label(Label(TRACE, span_id(i), label, f"r{n}", 1.0))
    estimate = only(ledger)
    c = estimate.corrected
    assert (c.labels, c.pending) == (20, 1)
    assert estimate.agreement.rate == pytest.approx(20 / 21)
    # one pair in 21 apart: a reviewer errs e with 2e(1-e) = 1/21; two that agree
    # err e² / (e² + (1-e)²), and the rate of their majorities, 5/20, is corrected for that
    e = c.reviewer_error.value
    assert e == pytest.approx((1 - (1 - 2 / 21) ** 0.5) / 2)
    m = e * e / (e * e + (1 - e) ** 2)
    assert c.rate == pytest.approx((5 / 20 - m) / (1 - 2 * m))


def test_one_reviewer_per_span_leaves_their_error_unmeasured_and_says_so() -> None:
    ledger = Ledger(min_labels=1)
    fill(ledger, 2)
    ledger.add_label(Label(TRACE, span_id(0), "hallucinated", "ana", 1.0))
    ledger.add_label(Label(TRACE, span_id(1), "factual", "ben", 1.0))
    c = only(ledger).corrected
    assert c.rate == pytest.approx(0.5) and c.reviewer_error.value is None
    assert any("not measured" in note for note in c.notes)


def test_a_reviewers_latest_label_wins() -> None:
    ledger = Ledger(min_labels=1)
    fill(ledger, 1)
    ledger.add_label(Label(TRACE, span_id(0), "hallucinated", "ana", 2.0))
    ledger.add_label(Label(TRACE, span_id(0), "factual", "ana", 1.0))  # older: ignored
    assert only(ledger).corrected.rate == pytest.approx(1.0)


def test_a_label_counts_in_its_spans_window_however_late() -> None:
    ledger = Ledger(window_seconds=2 * HOUR, min_labels=1)
    fill(ledger, 2, time=1.5 * HOUR)
    ledger.add_selection(Selection(TRACE, span_id(9), "judge", F, 1.0, 1.0, True, 10 * HOUR))
    assert only(ledger, now=2 * HOUR).corrected.labels == 0
    ledger.add_label(Label(TRACE, span_id(0), "factual", "ana", 11 * HOUR))  # days later
    past = only(ledger, now=2 * HOUR).corrected
    assert (past.labels, past.pending) == (1, 1)
    assert only(ledger).corrected.labels == 0  # the newest window holds only span 9


def test_a_label_line_says_what_is_wrong() -> None:
    good = {"trace_id": TRACE, "span_id": span_id(1), "label": "factual"}
    assert parse_label(good).reviewer == ""
    for bad, reason in (
        ({**good, "label": "wrong"}, "label must be one of"),
        ({**good, "trace_id": "xyz"}, "trace_id must be 32 hex digits"),
        ({**good, "time": "noon"}, "time must be unix seconds"),
        ([], "not a JSON object"),
    ):
        with pytest.raises(ValueError, match=reason):
            parse_label(bad)


def annotation(i: int, label: str, kind: str = "HUMAN", name: str = "tracefact.review") -> Any:
    return human(span_id(i), label, kind, name)


def test_human_annotations_are_polled_in_batches_of_selected_ids(fake_phoenix: str) -> None:
    FakePhoenix.annotations = [
        annotation(1, "hallucinated"),
        annotation(2, "factual", kind="LLM"),  # not a person
        annotation(3, "factual", name="other"),  # another annotation
        annotation(250, "factual"),
    ]
    ids = [(TRACE, span_id(i)) for i in range(1, 251)]
    with phoenix.client(fake_phoenix) as http:
        assert phoenix.ensure_annotation_config(http) is True
        assert phoenix.ensure_annotation_config(http) is False  # already there
        labels = phoenix.poll_labels(http, "default", ids)
    assert [(x.span_id, x.label, x.reviewer) for x in labels] == [
        (span_id(1), "hallucinated", "ana"),
        (span_id(250), "factual", "ana"),
    ]
    assert [len(q["span_ids"]) for q in FakePhoenix.queries] == [100, 100, 50]
    (config,) = FakePhoenix.configs
    assert config["type"] == "CATEGORICAL"
    assert [v["label"] for v in config["values"]] == ["hallucinated", "factual", "unsure"]


def test_the_collectors_journal_brings_selections_back_after_a_restart(tmp_path: Any) -> None:
    from opentelemetry.sdk.metrics import MeterProvider

    from tracefact import semconv
    from tracefact.pipeline.verdict import Record, Verdict
    from tracefact.review.live import ReviewMonitor

    journal = tmp_path / "review.journal"
    first = ReviewMonitor(Ledger(min_labels=1), MeterProvider(), journal=journal)
    attributes = {
        semconv.EVAL_STATUS: "ok",
        semconv.EVAL_SAMPLE_RATE: 0.5,
        semconv.REVIEW_STRATUM: "factual",
        semconv.REVIEW_PROBABILITY: 1.0,
        semconv.REVIEW_SELECTED: True,
        semconv.REVIEW_EVALUATOR: "judge",
    }
    for i in range(3):
        record = Record(1, i + 1, None, "answer", {}, end_time=int(5 * HOUR * 1e9))
        first.observe(record, Verdict("ok", 0.5, attributes))
    restarted = ReviewMonitor(Ledger(min_labels=1), MeterProvider(), journal=journal)
    assert sorted(restarted.ledger.selected_ids) == sorted(first.ledger.selected_ids)
    assert len(restarted.ledger.selected_ids) == 3
    restarted.ledger.add_label(Label(f"{1:032x}", span_id(1), "hallucinated", "ana", 1.0))
    (estimate,) = restarted.ledger.estimates()
    assert (estimate.corrected.labels, estimate.corrected.pending) == (1, 2)
