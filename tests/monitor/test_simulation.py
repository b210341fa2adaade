"""Does the 95% interval hold 95% of the time? Synthetic traffic with known true rates.

Each scenario is a population of LLM calls in strata (group, size, true rate, sample
rate). Per seed, numpy draws the population's hallucinations, which calls the sampler
evaluates and which of those were hallucinated (hypergeometric: the sample is drawn
from that very population); the estimator gets the evaluated calls through its public
API, as counts per (weight, verdict). The truth is each group's true rate, that of the
process generating its calls (Σ calls x rate / Σ calls over its strata): what a monitor
wants to know, and what the interval is for. (A group evaluated in full has its realised
rate exactly; the interval, about the process, is then wider than that needs.)

Run `python -m tests.monitor.test_simulation` (or pytest with -s) for the table of
coverage figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from tracefact import semconv
from tracefact.monitor import Observation, RateEstimator

SEEDS = 1000
"""Per scenario: coverage is then known to about ±0.7 points (one standard error)."""


@dataclass(frozen=True)
class Stratum:
    group: str
    calls: int
    true_rate: float
    sample_rate: float


SCENARIOS: dict[str, tuple[Stratum, ...]] = {
    # One sample rate for all: the weights are equal and the interval is Wilson's.
    "all at 1%": (Stratum("a", 100_000, 0.05, 0.01), Stratum("b", 200_000, 0.01, 0.01)),
    "all at 100%": (Stratum("a", 400, 0.08, 1.0), Stratum("b", 1500, 0.02, 1.0)),
    # Rates from 1% to 100% mixed at random, the same risk at every rate.
    "mixed 1%..100%": tuple(
        Stratum(group, 20_000, rate, sample)
        for group, rate in (("a", 0.06), ("b", 0.15))
        for sample in (0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)
    ),
    # Mixed rates that follow the risk: rarely judged traffic is the riskiest.
    "mixed, risk at low rates": (
        Stratum("a", 30_000, 0.20, 0.01),
        Stratum("a", 30_000, 0.10, 0.05),
        Stratum("a", 30_000, 0.05, 0.2),
        Stratum("a", 30_000, 0.01, 1.0),
    ),
    # A rule evaluates the risky route fully, the rest at 1%.
    "risky route 100%, rest 1%": (
        Stratum("a", 10_000, 0.30, 1.0),
        Stratum("a", 90_000, 0.02, 0.01),
        Stratum("b", 5_000, 0.40, 1.0),
        Stratum("b", 150_000, 0.04, 0.01),
    ),
    # The same with little traffic: about 4 hallucinations among the 1% stratum's 180.
    "risky 100%, rest 1%, small": (
        Stratum("a", 2_000, 0.30, 1.0),
        Stratum("a", 18_000, 0.02, 0.01),
    ),
}


@dataclass(frozen=True)
class Result:
    group: str
    coverage: float
    """Share of seeds whose interval held the true rate."""
    relative_bias: float
    """Mean estimate / mean true rate - 1."""
    unweighted_ratio: float
    """Mean rate of the evaluated calls, unweighted, / mean true rate."""
    mean_width: float


def simulate(strata: tuple[Stratum, ...], seed: int, seeds: int = SEEDS) -> list[Result]:
    rng = np.random.default_rng(seed)
    calls = np.array([s.calls for s in strata])[:, None]
    rates = np.array([s.true_rate for s in strata])[:, None]
    samples = np.array([s.sample_rate for s in strata])[:, None]
    hallucinated = rng.binomial(calls, rates, (len(strata), seeds))
    evaluated = rng.binomial(calls, samples, (len(strata), seeds))
    judged_bad = rng.hypergeometric(hallucinated, calls - hallucinated, evaluated)
    groups = sorted({s.group for s in strata})
    found: dict[str, list[tuple[float, float, float]]] = {g: [] for g in groups}
    for column in range(seeds):
        estimator = RateEstimator(group_by=("route",), clock=lambda: 0.0)
        for row, stratum in enumerate(strata):
            bad, total = int(judged_bad[row, column]), int(evaluated[row, column])
            for verdict, count in ((True, bad), (False, total - bad)):
                if count:
                    estimator.add(
                        Observation(
                            "judge",
                            (stratum.group,),
                            1 / stratum.sample_rate,
                            semconv.STATUS_OK,
                            verdict,
                            0.0,
                        ),
                        count=count,
                    )
        for estimate in estimator.estimates():
            assert estimate.rate is not None
            found[estimate.group["route"]].append((estimate.rate, estimate.lower, estimate.upper))
    results = []
    for group in groups:
        rows = [i for i, s in enumerate(strata) if s.group == group]
        truth = np.full(seeds, (calls[rows] * rates[rows]).sum() / calls[rows].sum())
        unweighted = judged_bad[rows].sum(axis=0) / evaluated[rows].sum(axis=0)
        estimates = np.array(found[group])
        assert len(estimates) == seeds, "every seed judged some calls of every group"
        held = (estimates[:, 1] <= truth) & (truth <= estimates[:, 2])
        results.append(
            Result(
                group=group,
                coverage=float(held.mean()),
                relative_bias=float(estimates[:, 0].mean() / truth.mean() - 1),
                unweighted_ratio=float(unweighted.mean() / truth.mean()),
                mean_width=float((estimates[:, 2] - estimates[:, 1]).mean()),
            )
        )
    return results


def table() -> str:
    lines = [f"{'scenario':28} group  coverage  bias    unweighted/true  width"]
    for index, (name, strata) in enumerate(SCENARIOS.items()):
        for r in simulate(strata, seed=index):
            lines.append(
                f"{name:28} {r.group:6} {r.coverage:7.1%}  {r.relative_bias:+6.2%}  "
                f"{r.unweighted_ratio:8.2f}x        {r.mean_width:.4f}"
            )
    return "\n".join(lines)


@pytest.mark.parametrize(("index", "name"), list(enumerate(SCENARIOS)))
def test_the_true_rate_lies_in_the_interval_95_percent_of_the_time(index: int, name: str) -> None:
    results = simulate(SCENARIOS[name], seed=index)
    for r in results:
        print(f"{name}: group {r.group}: coverage {r.coverage:.1%}, bias {r.relative_bias:+.2%}")
        assert 0.93 <= r.coverage <= 0.99, (name, r)
        assert abs(r.relative_bias) < 0.05, (name, r)


def test_the_unweighted_rate_of_a_stratified_sample_is_several_times_too_high() -> None:
    """What the weights correct: the risky route dominates the evaluated calls."""
    for r in simulate(SCENARIOS["risky route 100%, rest 1%"], seed=4, seeds=200):
        assert r.unweighted_ratio > 3, r
        assert abs(r.relative_bias) < 0.05, r


if __name__ == "__main__":
    print(table())
