"""The review design: Neyman allocation of a label budget, and selection with known π."""

from __future__ import annotations

import pytest

from tracefact import semconv
from tracefact._clock import ManualClock
from tracefact.review.design import (
    HOUR,
    ReviewSampler,
    StratumSize,
    allocate,
    label_floor,
    selected,
)
from tracefact.review.estimate import Stratum

H = Stratum("", "hallucinated")
F = Stratum("", "factual")


def expected_labels(pi: dict[Stratum, float], sizes: dict[Stratum, StratumSize]) -> float:
    return sum(pi[h] * sizes[h].evaluated for h in sizes)


def test_neyman_allocation_follows_weight_times_spread() -> None:
    sizes = {H: StratumSize(50_000, 5_000), F: StratumSize(950_000, 95_000)}
    pi = allocate(1000, sizes, min_labels=0)
    assert expected_labels(pi, sizes) == pytest.approx(1000)
    labels_h, labels_f = pi[H] * 5_000, pi[F] * 95_000
    # n_h ∝ N_h·S_h: S = 0.5 for flagged spans, sqrt(0.2 x 0.8) = 0.4 for passed ones
    assert labels_h / labels_f == pytest.approx((0.05 * 0.5) / (0.95 * 0.4))


def test_never_half_and_half_and_never_a_live_stratum_left_out() -> None:
    sizes = {H: StratumSize(4_700, 470), F: StratumSize(95_300, 9_530)}
    pi = allocate(200, sizes, min_labels=0)
    assert pi[H] * 470 < 60  # far from 100 of 200
    assert all(p > 0 for p in pi.values())


def two_routes(*weights: float, evaluated: float) -> dict[Stratum, StratumSize]:
    """Routes a and b, flagged and passed spans, of these weights, a share of them evaluated."""
    strata = [Stratum(route, verdict) for route in "ab" for verdict in ("hallucinated", "factual")]
    return {h: StratumSize(w, w * evaluated) for h, w in zip(strata, weights, strict=True)}


def test_a_heavy_stratum_gets_its_floor_first() -> None:
    sizes = two_routes(10_000, 90_000, 60_000, 840_000, evaluated=0.1)
    pi = allocate(200, sizes)
    for stratum in (Stratum("a", "factual"), Stratum("b", "hallucinated")):
        assert pi[stratum] * sizes[stratum].evaluated >= label_floor(30) - 1e-9
    assert expected_labels(pi, sizes) == pytest.approx(200)


def test_a_light_stratum_still_gets_its_least_labels() -> None:
    """A stratum of 0.7% of the weight gets 10 labels of 200, not Neyman's handful."""
    sizes = two_routes(730, 49_270, 2_200, 147_800, evaluated=1.0)
    pi = allocate(200, sizes)
    light = Stratum("a", "hallucinated")
    assert pi[light] * 730 == pytest.approx(10)
    assert expected_labels(pi, sizes) == pytest.approx(200)


def test_probabilities_never_exceed_one_and_the_rest_goes_elsewhere() -> None:
    sizes = {H: StratumSize(50_000, 50), F: StratumSize(50_000, 50_000)}
    pi = allocate(1000, sizes)
    assert pi[H] == 1.0
    assert expected_labels(pi, sizes) == pytest.approx(1000)


def test_selection_is_a_hash_of_the_span_id_at_its_probability() -> None:
    picks = [selected(span_id, 0.1) for span_id in range(1, 20_001)]
    assert 0.09 < sum(picks) / len(picks) < 0.11
    assert picks == [selected(span_id, 0.1) for span_id in range(1, 20_001)]
    assert all(selected(span_id, 1.0) for span_id in range(1, 100))
    assert not any(selected(span_id, 0.0) for span_id in range(1, 100))


def verdict(label: str) -> dict[str, object]:
    return {
        semconv.EVAL_STATUS: "ok",
        semconv.EVAL_SAMPLE_RATE: 0.5,
        "tracefact.eval.judge.status": "ok",
        "tracefact.eval.judge.label": label,
    }


def test_configured_probabilities_by_stratum_or_verdict() -> None:
    sampler = ReviewSampler(
        probabilities={"checkout/hallucinated": 0.9, "hallucinated": 0.3, "*": 0.01},
        group_by=("route",),
    )
    checkout = sampler.select(7, 2.0, {**verdict("hallucinated"), "http.route": "checkout"}, {})
    assert checkout[semconv.REVIEW_PROBABILITY] == 0.9
    assert checkout[semconv.REVIEW_STRATUM] == "checkout/hallucinated"
    assert checkout[semconv.REVIEW_EVALUATOR] == "judge"
    other = sampler.select(7, 2.0, {**verdict("hallucinated"), "http.route": "search"}, {})
    assert other[semconv.REVIEW_PROBABILITY] == 0.3
    passed = sampler.select(7, 2.0, {**verdict("factual"), "http.route": "search"}, {})
    assert passed[semconv.REVIEW_PROBABILITY] == 0.01
    failed = sampler.select(7, 2.0, {semconv.EVAL_STATUS: "timeout"}, {})
    assert failed[semconv.REVIEW_STRATUM] == "(none)/none"


def test_a_budget_is_allocated_from_the_past_hours_and_at_most_hourly() -> None:
    clock = ManualClock()
    sampler = ReviewSampler(labels_per_day=240, clock=clock, initial_probability=0.05)
    span_id = 0

    def hour_of_traffic(flagged: int, passed: int) -> dict[str, set[float]]:
        nonlocal span_id
        seen: dict[str, set[float]] = {"hallucinated": set(), "factual": set()}
        for label, count in (("hallucinated", flagged), ("factual", passed)):
            for _ in range(count):
                span_id += 1
                attributes = sampler.select(span_id, 1.0, verdict(label), {})
                seen[label].add(attributes[semconv.REVIEW_PROBABILITY])
            clock.advance(HOUR / 2)
        return seen

    first = hour_of_traffic(100, 900)
    assert first == {"hallucinated": {0.05}, "factual": {0.05}}  # nothing known yet
    second = hour_of_traffic(100, 900)
    # one value each all hour long, though the counts grew: allocated once an hour
    ((flagged,), (passed,)) = second["hallucinated"], second["factual"]
    # a day of 2,400 flagged and 21,600 passed spans, 240 labels: 1% overall
    assert 0.005 < passed < flagged < 0.05


def test_a_design_needs_probabilities_or_a_budget() -> None:
    with pytest.raises(ValueError, match="one of them"):
        ReviewSampler()
    with pytest.raises(ValueError, match="one of them"):
        ReviewSampler(probabilities={"*": 0.1}, labels_per_day=10)
