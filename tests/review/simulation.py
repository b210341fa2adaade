"""Does the corrected interval hold the true rate? Synthetic traffic, a known truth, fixed seeds.

A day of traffic in two routes (a: a quarter, b: the rest) over 24 hours whose volume
follows the clock; each call is hallucinated with the scenario's true rate, and the
evaluator flags it with its sensitivity, or a factual one with 1 - its specificity. Per
seed, numpy draws (per cell of route x hour x truth x verdict) the calls, which of them are
evaluated (uniform, mixed: route a at 100% and b at 1%, or rate-limited: at most 300 an
hour), which evaluated ones are selected for review (uniform, or `allocate`'s stratified
design for the label budget) and which selected ones people label (and how). The strata's
sums go to `tracefact.review.estimate.corrected` through its public API. The truth is the
rate of all simulated traffic in the window (what the labels' people would say of every
call, had they read them all).

Run `python -m tests.review.simulation` for the full table (the closing note's figures).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

from tracefact.monitor.estimator import Totals, interval, wilson
from tracefact.review.design import StratumSize, allocate
from tracefact.review.estimate import Stratum, StratumTotals, corrected

SEEDS = 1000
HOURS = 24
TRAFFIC = 200_000
ROUTES = ("a", "b")
ROUTE_SHARE = np.array([0.25, 0.75])
HOURLY = 1 + 0.8 * np.sin(2 * np.pi * np.arange(HOURS) / HOURS)
HOURLY_TRAFFIC = np.round(TRAFFIC * ROUTE_SHARE[:, None] * HOURLY[None, :] / HOURLY.sum())
"""Calls per (route, hour): fixed, the truth and the verdicts are drawn."""
RATE_LIMIT_PER_HOUR = 300
Z = NormalDist().inv_cdf(0.975)

RATES = (0.02, 0.05, 0.10, 0.20)
EVALUATORS = ((0.17, 0.96), (0.3, 0.8), (0.8, 0.9), (0.95, 0.99))
EVALUATION = ("uniform", "mixed", "rate-limited")
REVIEW = ("uniform", "stratified")
LABELS = (50, 200, 2000)


@dataclass(frozen=True)
class Scenario:
    rate: float
    evaluator: tuple[float, float]
    evaluation: str
    review: str
    labels: int
    evaluator_b: tuple[float, float] | None = None
    """Route b's own (sensitivity, specificity): error rates that differ by group."""
    rate_change: bool = False
    """The true rate is half the scenario's in the first 12 hours, 1.5 times in the last."""
    reviewer_noise: float = 0.0
    """The chance a person's label is the wrong one (independent, alike for both answers)."""
    double_share: float = 0.0
    """The design's share of labelled spans a second reviewer labels too."""
    response: float = 1.0
    """The share of selected spans that ever get a label."""

    @property
    def name(self) -> str:
        sens, spec = self.evaluator
        text = (
            f"p={self.rate:.0%} eval=({sens},{spec}) {self.evaluation}/{self.review} "
            f"{self.labels} labels"
        )
        extras = [
            f"route b eval={self.evaluator_b}" if self.evaluator_b else "",
            "rate change" if self.rate_change else "",
            f"{self.reviewer_noise:.0%} reviewer noise" if self.reviewer_noise else "",
            f"{self.double_share:.0%} labelled twice" if self.double_share else "",
            f"{1 - self.response:.0%} never labelled" if self.response < 1 else "",
        ]
        return " ".join([text, *[e for e in extras if e]])


GRID = tuple(
    Scenario(rate, evaluator, evaluation, review, labels)
    for rate, evaluator, evaluation, review, labels in itertools.product(
        RATES, EVALUATORS, EVALUATION, REVIEW, LABELS
    )
)
DOUBLE_SHARE = 0.2
"""With reviewer noise, the design has a fifth of the labelled spans labelled twice."""
_STRESS_BASE = tuple(
    Scenario(rate, (0.3, 0.8), "uniform", "stratified", labels)
    for rate in (0.05, 0.10)
    for labels in (200, 2000)
)
STRESS = tuple(
    replace(base, **change)  # type: ignore[arg-type]
    for base in _STRESS_BASE
    for change in (
        {"evaluator_b": (0.9, 0.97)},
        {"rate_change": True},
        {"reviewer_noise": 0.05, "double_share": DOUBLE_SHARE},
        {"double_share": DOUBLE_SHARE},
        {"response": 0.7},
    )
)


@dataclass(frozen=True)
class Result:
    scenario: Scenario
    shown: int
    coverage: float
    """Share of the shown figures whose interval held the true rate."""
    noisy_coverage: float
    """The same for the rate the reviewers' labels measure (differs only with noise)."""
    withheld: float
    mean_estimate: float
    mean_truth: float
    standard_error: float
    """Monte Carlo standard error of the mean estimate."""
    median_width: float
    labels_only_width: float
    evaluator_only_width: float
    evaluator_only_coverage: float
    sensitivity: float
    specificity: float

    @property
    def bias_ok(self) -> bool:
        """The mean estimate within max(5% relative, 3 Monte Carlo standard errors)."""
        gap = abs(self.mean_estimate - self.mean_truth)
        return gap <= max(0.05 * self.mean_truth, 3 * self.standard_error)


def _sample_rates(evaluation: str) -> np.ndarray:
    """R per (route, hour)."""
    if evaluation == "uniform":
        return np.full((2, HOURS), 0.05)
    if evaluation == "mixed":
        return np.array([[1.0] * HOURS, [0.01] * HOURS])
    per_hour = HOURLY_TRAFFIC.sum(axis=0)
    return np.broadcast_to(np.minimum(1.0, RATE_LIMIT_PER_HOUR / per_hour), (2, HOURS)).copy()


def _true_rates(s: Scenario) -> np.ndarray:
    """P per (route, hour)."""
    rates = np.full((2, HOURS), s.rate)
    if s.rate_change:
        rates[:, : HOURS // 2] *= 0.5
        rates[:, HOURS // 2 :] *= 1.5
    return rates


def _error_rates(s: Scenario) -> tuple[np.ndarray, np.ndarray]:
    """Sensitivity and specificity per route, shaped to broadcast over (route, hour)."""
    b = s.evaluator_b or s.evaluator
    sens = np.array([s.evaluator[0], b[0]])[:, None]
    spec = np.array([s.evaluator[1], b[1]])[:, None]
    return sens, spec


STRATA = tuple(
    Stratum(route, verdict) for route in ROUTES for verdict in ("hallucinated", "factual")
)


def design(s: Scenario) -> np.ndarray:
    """π per (route, verdict: 0 hallucinated, 1 factual), decided from expected counts."""
    r = _sample_rates(s.evaluation)
    p = _true_rates(s)
    sens, spec = _error_rates(s)
    flagged = p * sens + (1 - p) * (1 - spec)
    share = np.stack([flagged, 1 - flagged], axis=-1)  # (route, hour, verdict)
    weight = (HOURLY_TRAFFIC[..., None] * share).sum(axis=1)  # (route, verdict)
    evaluated = (HOURLY_TRAFFIC[..., None] * r[..., None] * share).sum(axis=1)
    if s.review == "uniform":
        return np.full((2, 2), min(1.0, s.labels / evaluated.sum()))
    sizes = {
        STRATA[2 * g + v]: StratumSize(float(weight[g, v]), float(evaluated[g, v]))
        for g in range(2)
        for v in range(2)
    }
    pi = allocate(s.labels, sizes)
    return np.array([[pi[STRATA[2 * g + v]] for v in range(2)] for g in range(2)])


def _people(
    rng: np.random.Generator, labelled: np.ndarray, s: Scenario
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per cell: majorities saying hallucinated, spans labelled twice, those apart (ties).

    Each label is wrong with the scenario's noise, independently; a span labelled twice
    takes its two labels' majority, as the ledger does: where they differ it is a tie,
    unsure, so it stays pending.
    """
    e = s.reviewer_noise
    if not e and not s.double_share:  # no draws: the other scenarios keep their seeds' draws
        said_bad = labelled.astype(float)
        said_bad[..., 0, :] = 0
        return said_bad, 0 * labelled, 0 * labelled
    doubled = rng.binomial(labelled, s.double_share)
    single = labelled - doubled
    wrong = rng.binomial(single, e)
    both = rng.binomial(doubled, e * e)
    one = rng.binomial(doubled - both, 2 * e * (1 - e) / (1 - e * e))
    right = single - wrong + doubled - both - one
    said_bad = 0 * labelled
    said_bad[..., 0, :] += (wrong + both)[..., 0, :]  # factual calls called hallucinated
    said_bad[..., 1, :] += right[..., 1, :]
    return said_bad, doubled, one


def simulate(s: Scenario, seed: int, seeds: int = SEEDS) -> Result:
    rng = np.random.default_rng(seed)
    r = _sample_rates(s.evaluation)[None, :, :, None, None]  # seed, route, hour, y, verdict
    p = _true_rates(s)
    sens, spec = _error_rates(s)
    pi = design(s)[None, :, None, None, :]
    calls = np.broadcast_to(HOURLY_TRAFFIC, (seeds, 2, HOURS)).astype(np.int64)
    bad = rng.binomial(calls, p)
    good = calls - bad
    bad_flagged = rng.binomial(bad, np.broadcast_to(sens, bad.shape))
    good_flagged = rng.binomial(good, np.broadcast_to(1 - spec, good.shape))
    # cells[..., y, v]: y 0 factual / 1 hallucinated, v 0 flagged (hallucinated) / 1 passed
    cells = np.stack(
        [
            np.stack([good_flagged, good - good_flagged], axis=-1),
            np.stack([bad_flagged, bad - bad_flagged], axis=-1),
        ],
        axis=-2,
    )
    evaluated = rng.binomial(cells, np.broadcast_to(r, cells.shape))
    picked = rng.binomial(evaluated, np.broadcast_to(pi, cells.shape))
    labelled = rng.binomial(picked, s.response) if s.response < 1 else picked
    said_bad, doubled, apart = _people(rng, labelled, s)
    decided = labelled - apart  # two labels apart are a tie: pending
    w = 1 / r
    v = w / pi

    def by_stratum(values: np.ndarray) -> np.ndarray:
        """(seed, route, verdict): summed over hours and truth."""
        return values.sum(axis=(2, 3))

    weight = by_stratum(evaluated * w)
    excess = by_stratum(evaluated * w * (w - 1))
    n_eval = by_stratum(evaluated)
    n_picked = by_stratum(picked)
    n_labelled = by_stratum(decided)
    label_weight = by_stratum(decided * v)
    label_weight_sq = by_stratum(decided * v * v)
    agreed_weight = by_stratum((doubled - apart) * v)
    bad_label_weight = by_stratum(said_bad * v)
    pairs, disagreeing = by_stratum(doubled), by_stratum(apart)
    truth = bad.sum(axis=(1, 2)) / calls.sum(axis=(1, 2))
    flip = s.reviewer_noise
    noisy_truth = truth * (1 - flip) + (1 - truth) * flip
    # The evaluator alone (the monitor's interval) and the labels alone (Wilson, Kish's n).
    eval_weight = weight.sum(axis=(1, 2))
    eval_bad = weight[:, :, 0].sum(axis=1)
    eval_sq = by_stratum(evaluated * w * w)
    labels_rate = bad_label_weight.sum(axis=(1, 2)) / np.maximum(
        label_weight.sum(axis=(1, 2)), 1e-300
    )
    labels_n = label_weight.sum(axis=(1, 2)) ** 2 / np.maximum(
        label_weight_sq.sum(axis=(1, 2)), 1e-300
    )

    estimates, lows, highs, shown, labels_widths, eval_widths, eval_held = (
        [],
        [],
        [],
        [],
        [],
        [],
        [],
    )
    sensitivities, specificities = [], []
    for i in range(seeds):
        totals = {}
        for g in range(2):
            for verdict in range(2):
                t = StratumTotals(
                    evaluated=int(n_eval[i, g, verdict]),
                    weight=float(weight[i, g, verdict]),
                    weight_excess=float(excess[i, g, verdict]),
                    selected=int(n_picked[i, g, verdict]),
                    labelled=int(n_labelled[i, g, verdict]),
                    label_weight=float(label_weight[i, g, verdict]),
                    label_weight_squared=float(label_weight_sq[i, g, verdict]),
                    hallucinated_label_weight=float(bad_label_weight[i, g, verdict]),
                    label_weight_by_reviewers={
                        1: float(label_weight[i, g, verdict] - agreed_weight[i, g, verdict]),
                        2: float(agreed_weight[i, g, verdict]),
                    },
                    lowest_probability=float(pi[0, g, 0, 0, verdict]),
                    highest_probability=float(pi[0, g, 0, 0, verdict]),
                    reviewer_pairs=int(pairs[i, g, verdict]),
                    disagreeing_pairs=int(disagreeing[i, g, verdict]),
                )
                totals[STRATA[2 * g + verdict]] = t
        c = corrected(totals)
        shown.append(c.shown)
        estimates.append(c.rate if c.rate is not None else math.nan)
        lows.append(c.lower)
        highs.append(c.upper)
        sensitivities.append(c.sensitivity.value if c.sensitivity.value is not None else math.nan)
        specificities.append(c.specificity.value if c.specificity.value is not None else math.nan)
        low, high = wilson(float(labels_rate[i]), float(labels_n[i]), Z)
        labels_widths.append(high - low)
        ev = interval(
            Totals(
                judged=int(n_eval[i].sum()),
                hallucinated=int(n_eval[i, :, 0].sum()),
                weight=float(eval_weight[i]),
                hallucinated_weight=float(eval_bad[i]),
                weight_squared=float(eval_sq[i].sum()),
                hallucinated_weight_squared=float(eval_sq[i, :, 0].sum()),
            )
        )
        eval_widths.append(ev.upper - ev.lower)
        eval_held.append(ev.lower <= truth[i] <= ev.upper)
    on = np.array(shown)
    est, lo, hi = np.array(estimates)[on], np.array(lows)[on], np.array(highs)[on]
    count = int(on.sum())
    return Result(
        scenario=s,
        shown=count,
        coverage=float(((lo <= truth[on]) & (truth[on] <= hi)).mean()) if count else math.nan,
        noisy_coverage=float(((lo <= noisy_truth[on]) & (noisy_truth[on] <= hi)).mean())
        if count
        else math.nan,
        withheld=1 - count / seeds,
        mean_estimate=float(est.mean()) if count else math.nan,
        mean_truth=float(truth[on].mean()) if count else float(truth.mean()),
        standard_error=float(est.std(ddof=1) / math.sqrt(count)) if count > 1 else math.inf,
        median_width=float(np.median(hi - lo)) if count else math.nan,
        labels_only_width=float(np.median(labels_widths)),
        evaluator_only_width=float(np.median(eval_widths)),
        evaluator_only_coverage=float(np.mean(eval_held)),
        sensitivity=float(np.nanmean(sensitivities)),
        specificity=float(np.nanmean(specificities)),
    )


HEADER = (
    f"{'scenario':64} shown  cover  withheld  bias    width  labels-only  evaluator-only (cover)"
)


def row(r: Result) -> str:
    bias = r.mean_estimate / r.mean_truth - 1 if r.shown else math.nan
    return (
        f"{r.scenario.name:64} {r.shown:5d}  {r.coverage:5.1%}  {r.withheld:6.1%}  "
        f"{bias:+6.1%}  {r.median_width:.4f}  {r.labels_only_width:.4f}       "
        f"{r.evaluator_only_width:.4f} ({r.evaluator_only_coverage:.0%})"
    )


def main() -> None:
    print(HEADER)
    for index, scenario in enumerate(GRID + STRESS):
        print(row(simulate(scenario, seed=index)), flush=True)


if __name__ == "__main__":
    main()
