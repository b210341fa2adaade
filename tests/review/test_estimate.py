"""The corrected rate on small hand-made windows: exact cases, withholding, agreement."""

from __future__ import annotations

import pytest

from tracefact.review.estimate import Stratum, StratumTotals, corrected

H = Stratum("", "hallucinated")
F = Stratum("", "factual")
N = Stratum("", "none")


def stratum(
    evaluated: int, labels: int, hallucinated: int, r: float = 0.1, pi: float | None = None
) -> StratumTotals:
    """`evaluated` spans at rate r, `labels` of them labelled (`hallucinated` as such)."""
    t = StratumTotals()
    t.add_evaluated(1 / r, evaluated)
    probability = pi if pi is not None else labels / evaluated
    t.add_selected(labels)
    t.add_label(1 / r, probability, True, hallucinated)
    t.add_label(1 / r, probability, False, labels - hallucinated)
    return t


def test_every_span_evaluated_and_labelled_gives_the_rate_exactly() -> None:
    c = corrected({H: stratum(50, 50, 30, r=1), F: stratum(950, 950, 20, r=1)})
    assert c.rate == pytest.approx(50 / 1000)
    assert c.lower == pytest.approx(c.rate) and c.upper == pytest.approx(c.rate)
    assert c.shown and c.labels == 1000 and c.pending == 0


def test_the_rate_is_the_strata_rates_weighted_by_their_traffic() -> None:
    # 2% of the traffic flagged, of which people call 40% hallucinated; 98% passed, 5%.
    c = corrected({H: stratum(200, 50, 20), F: stratum(9800, 100, 5)})
    assert c.rate == pytest.approx(0.02 * 0.4 + 0.98 * 0.05)
    assert c.lower < c.rate < c.upper
    assert c.evaluator_rate == pytest.approx(0.02)


def test_a_stratum_without_hallucinations_still_bounds_the_rate_above() -> None:
    c = corrected({H: stratum(100, 40, 10), F: stratum(9900, 60, 0)})
    factual = next(s for s in c.strata if s.stratum == F)
    assert factual.rate == 0 and factual.lower == 0
    assert factual.upper > 0.04  # Wilson with 60 labels, never the observed 0
    assert c.upper > c.rate + 0.03


def test_a_heavy_stratum_with_too_few_labels_withholds_the_figure_with_the_reason() -> None:
    thin = corrected({H: stratum(1000, 29, 10), F: stratum(9000, 100, 4)})
    assert not thin.shown
    assert thin.withheld is not None and "hallucinated" in thin.withheld
    assert "29 of the 30" in thin.withheld
    enough = corrected({H: stratum(1000, 30, 10), F: stratum(9000, 100, 4)})
    assert enough.shown


def test_whether_a_figure_is_shown_never_depends_on_the_labels_values() -> None:
    for hallucinated in (0, 5, 29):
        assert not corrected({H: stratum(1000, 29, hallucinated), F: stratum(9000, 100, 4)}).shown


def test_a_light_stratum_needs_no_labels_and_is_bounded_by_zero_and_one() -> None:
    light = StratumTotals()
    light.add_evaluated(10.0, 30)  # 300 of 10,300: under 5% of the weight
    c = corrected({F: stratum(1000, 100, 5), N: light})
    assert c.shown
    none = next(s for s in c.strata if s.stratum == N)
    assert (none.lower, none.upper) == (0.0, 1.0)
    assert c.upper - c.rate > 300 / 10_300 * 0.9  # that stratum could be all hallucinated


def test_unsure_and_unlabelled_selections_are_pending_and_a_low_response_is_said() -> None:
    t = stratum(1000, 40, 4)
    t.add_selected(20)  # selected, never labelled
    c = corrected({F: t})
    assert c.pending == 20 and c.labels == 40
    assert c.response_rate == pytest.approx(40 / 60)
    assert c.notes and "random subset" in c.notes[0]


def test_sensitivity_and_specificity_are_weighted_by_the_design_not_the_labels_share() -> None:
    # Flagged spans are oversampled tenfold: raw shares of the labels would be far off.
    h = stratum(1000, 500, 400, pi=0.5)
    f = stratum(9000, 450, 45, pi=0.05)
    c = corrected({H: h, F: f})
    bad_flagged, bad_passed = 1000 * 0.8, 9000 * 0.1
    assert c.sensitivity.value == pytest.approx(bad_flagged / (bad_flagged + bad_passed))
    good_passed, good_flagged = 9000 * 0.9, 1000 * 0.2
    assert c.specificity.value == pytest.approx(good_passed / (good_passed + good_flagged))
    assert c.sensitivity.lower < c.sensitivity.value < c.sensitivity.upper
    assert c.specificity.lower < c.specificity.value < c.specificity.upper


def test_labels_needed_shrink_as_labels_come_and_never_rest_on_an_observed_zero() -> None:
    few = corrected({H: stratum(1000, 40, 10), F: stratum(9000, 40, 0)}, target_half_width=0.02)
    assert few.labels_needed[F] > 0  # from the Wilson upper bound, not from 0
    many = corrected(
        {H: stratum(1000, 400, 100), F: stratum(9000, 2000, 0)}, target_half_width=0.02
    )
    assert sum(many.labels_needed.values()) < sum(few.labels_needed.values())


def test_totals_add_up() -> None:
    a, b = stratum(100, 10, 2, pi=0.1), stratum(300, 20, 3, pi=0.05)
    a.merge(b)
    whole = corrected({F: a})
    assert whole.labels == 30
    # each label stands for 1/π evaluated spans: 2 x 10 + 3 x 20 of 10 x 10 + 20 x 20
    assert whole.rate == pytest.approx((2 * 10 + 3 * 20) / (10 * 10 + 20 * 20))


def test_no_evaluated_spans_say_so() -> None:
    c = corrected({})
    assert c.rate is None and c.withheld == "no evaluated spans"


def test_stratum_text_reads_back() -> None:
    for s in (Stratum("", "factual"), Stratum("checkout|gpt-4o", "hallucinated")):
        assert Stratum.parse(str(s)) == s


def one_probability(evaluated: int, labels: int, hallucinated: int, pi: float) -> StratumTotals:
    """A stratum whose every evaluated span was selected with `pi` (uniform review)."""
    t = StratumTotals()
    t.add_evaluated(10.0, evaluated, probability=pi)
    t.add_selected(labels)
    t.add_label(10.0, pi, True, hallucinated)
    t.add_label(10.0, pi, False, labels - hallucinated)
    return t


def test_thin_strata_sharing_one_probability_are_estimated_together_and_shown() -> None:
    # Uniform review at 2%: the flagged stratum (10% of the weight) gets 20 labels.
    flagged, passed = one_probability(1000, 20, 12, 0.02), one_probability(9000, 180, 9, 0.02)
    c = corrected({H: flagged, F: passed})
    assert c.shown
    assert c.rate == pytest.approx(21 / 200)  # one random sample of all evaluated spans
    assert any("estimated together" in note for note in c.notes)
    assert {s.stratum for s in c.strata} == {H, F}  # reported apart, for sensitivity
    # The same labels under a design with two probabilities: nothing to pool, withheld.
    other = one_probability(1000, 20, 12, 0.021)
    assert not corrected({H: other, F: passed}).shown


def test_pooling_depends_on_label_counts_never_their_values() -> None:
    passed = one_probability(9000, 180, 9, 0.02)
    for hallucinated in (0, 10, 20):
        flagged = one_probability(1000, 20, hallucinated, 0.02)
        assert corrected({H: flagged, F: passed}).shown
        # passed spans selected with another π: the flagged stay alone, thin, withheld
        assert not corrected({H: flagged, F: stratum(9000, 180, 9)}).shown


def test_two_reviewers_disagreement_corrects_the_labels_rate() -> None:
    # Every span evaluated and labelled; labels wrong one time in ten (d = 2e(1-e) = 0.18).
    t = stratum(10_000, 10_000, 2_600, r=1, pi=1.0)
    t.add_pairs(5_000, 900)
    c = corrected({F: t})
    assert c.reviewer_error.value == pytest.approx(0.1)
    assert c.reviewer_error.lower < 0.1 < c.reviewer_error.upper
    assert c.rate == pytest.approx((0.26 - 0.1) / 0.8)  # p(1-e) + (1-p)e = 0.26 at p = 0.2
    assert c.lower < 0.2 < c.upper
    assert any("reviewers err on 10.0%" in note for note in c.notes)
