"""The corrected interval's targets, per scenario, over 1,000 fixed seeds (see simulation.py).

The whole grid (4 rates x 4 evaluators x 3 evaluation samplings x 2 review designs x 3
label counts) and the stress cases: about a minute and a half on two cores.

The issue's targets, as written: wherever a figure is shown, the interval covers the true
rate of all simulated traffic 93-99% of the time (reviewer noise included: the design
has a fifth of the labelled spans labelled twice, and a span takes its reviewers'
majority); the mean estimate is within max(5% relative, 3 Monte Carlo standard errors) of
the truth; no seed withheld at 2,000 labels, at most 5% at 200 labels for rates of 5% or
more (labels that came: with 30% of the selections never labelled, 200 selected give 140).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.review.simulation import GRID, STRESS, Result, Scenario, simulate

SCENARIOS = tuple(enumerate(GRID + STRESS))
ENOUGH_SHOWN = 200
"""Fewer shown figures than this say too little about coverage to test it (±1.5 points)."""


def check(r: Result) -> None:
    s = r.scenario
    if r.shown >= ENOUGH_SHOWN:
        assert 0.93 <= r.coverage <= 0.99, r
        assert r.bias_ok, r
    labels = s.labels * s.response
    if labels >= 2000:
        assert r.withheld == 0, r
    if labels >= 200 and s.rate >= 0.05:
        assert r.withheld <= 0.05, r


@pytest.mark.parametrize(("index", "scenario"), SCENARIOS, ids=[s.name for _, s in SCENARIOS])
def test_the_corrected_interval_holds_the_true_rate(index: int, scenario: Scenario) -> None:
    check(simulate(scenario, seed=index))


def test_the_evaluator_alone_misses_the_true_rate_the_correction_finds() -> None:
    """Today's default evaluator at a true 10%: its own interval almost never holds it."""
    scenario = Scenario(0.10, (0.17, 0.96), "uniform", "stratified", 2000)
    r = simulate(scenario, seed=7, seeds=200)
    assert r.evaluator_only_coverage < 0.01, r
    assert r.coverage > 0.9, r
    assert r.median_width < r.labels_only_width * 1.1, r


def test_without_doubly_labelled_spans_reviewer_noise_moves_the_rate_toward_one_half() -> None:
    """One reviewer per span cannot measure their error (the figure says so).

    Labels with 5% errors measure p(1-0.05) + (1-p)0.05, not p.
    """
    scenario = Scenario(0.05, (0.3, 0.8), "uniform", "stratified", 2000, reviewer_noise=0.05)
    r = simulate(scenario, seed=11, seeds=200)
    assert r.coverage < 0.5 < r.noisy_coverage, r


def test_doubly_labelled_spans_bring_the_interval_back_to_the_true_rate() -> None:
    noisy = Scenario(0.05, (0.3, 0.8), "uniform", "stratified", 2000, reviewer_noise=0.05)
    r = simulate(noisy, seed=11, seeds=200)
    doubled = simulate(replace(noisy, double_share=0.2), seed=11, seeds=200)
    assert doubled.coverage > 0.9 > r.coverage, (r, doubled)
