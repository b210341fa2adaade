"""Agreement metrics on known confusion matrices."""

from __future__ import annotations

import pytest

from tracefact.evaluators.confusion import Confusion, by_group


def test_counts_from_pairs() -> None:
    pairs = (
        [(True, True)] * 40 + [(False, True)] * 10 + [(True, False)] * 20 + [(False, False)] * 30
    )
    confusion = Confusion.of(pairs)
    assert confusion == Confusion(tp=40, fp=10, fn=20, tn=30)
    assert confusion.precision == pytest.approx(0.8)
    assert confusion.recall == pytest.approx(40 / 60)
    assert confusion.f1 == pytest.approx(2 * 0.8 * (2 / 3) / (0.8 + 2 / 3))
    assert confusion.balanced_accuracy == pytest.approx((40 / 60 + 30 / 40) / 2)
    assert confusion.accuracy == pytest.approx(0.7)
    assert confusion.summary()["n"] == 100


def test_always_factual_detector_is_chance() -> None:
    confusion = Confusion(tp=0, fp=0, fn=10, tn=90)
    assert confusion.accuracy == 0.9
    assert confusion.balanced_accuracy == 0.5
    assert (confusion.precision, confusion.recall, confusion.f1) == (0.0, 0.0, 0.0)


def test_perfect_and_empty() -> None:
    assert Confusion(tp=5, tn=5).summary()["balanced_accuracy"] == 1.0
    assert Confusion(tp=3).balanced_accuracy == 1.0  # only one class present
    assert Confusion().balanced_accuracy == 0.0


def test_groups_and_sum() -> None:
    groups = by_group([("QA", True, True), ("QA", False, True), ("dialogue", True, False)])
    assert list(groups) == ["QA", "dialogue"]
    assert groups["QA"] == Confusion(tp=1, fp=1)
    assert groups["QA"] + groups["dialogue"] == Confusion(tp=1, fp=1, fn=1)
