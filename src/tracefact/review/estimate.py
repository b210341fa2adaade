"""The hallucination rate people would find, from the evaluator's verdicts and a few labels.

The evaluator's rate is the rate of its labels, not of hallucinations. This corrects it with
human labels on a random subsample, as two-phase sampling for stratification (Särndal,
Swensson and Wretman 1992, ch. 9), which is prediction-powered inference (Angelopoulos et
al. 2023) in survey form with the best weighting for a yes/no verdict (PPI++):

- phase 1: a span is evaluated with probability r (weight w = 1/r, as the monitor does);
- phase 2: an evaluated span is selected for review with probability π, fixed per stratum
  h = (group, verdict), and recorded on the span;
- p̂ = Σ_h N̂_h·ȳ_h / N̂, with N̂_h = Σ w over h's evaluated spans and ȳ_h the people's rate
  over h's labelled spans, each weighted w/π.

Interval: each stratum's rate gets a Wilson interval on the effective sample size of its
variance (phase 2: (1-f)·deff/n; phase 1: Σw(w-1)/N̂_h², a Poisson sample of the realised
traffic), and the strata combine by MOVER (Zou and Donner 2008), with the phase-1 spread
between strata added on both sides. Wilson per stratum keeps it valid when a stratum shows
no hallucination; Wald would not (with 50 labels it covers a 2% rate a third of the time).

Strata selected with one and the same π (uniform review) are post-strata of one random
sample: a thin one is pooled with those that share its π (`pooled_strata`). Where two
reviewers labelled some spans, their disagreements measure the reviewers' error e, and the
rate is corrected for it (`reviewer_error`); where none did, a note says it is not measured.

Whether a figure is shown depends on the design only, never on the labels' values: a stratum
the estimate uses holding at least `min_share` of the window's weight with fewer than
`min_labels` labels withholds it, with the reason. tests/review/test_simulation.py
measures the coverage.

Everything adds up (`StratumTotals.merge`); pure Python, no OpenTelemetry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from statistics import NormalDist

from tracefact import semconv
from tracefact.monitor.estimator import wilson
from tracefact.review.design import label_floor
from tracefact.review.strata import Stratum

VERDICT_HALLUCINATED = semconv.REVIEW_VERDICT_HALLUCINATED
VERDICT_FACTUAL = semconv.REVIEW_VERDICT_FACTUAL
VERDICT_NONE = semconv.REVIEW_VERDICT_NONE


@dataclass(slots=True)
class StratumTotals:
    """Sums over one stratum's evaluated, selected and labelled spans; they add up."""

    evaluated: int = 0
    weight: float = 0.0
    """Σw over evaluated spans: N̂_h."""
    weight_excess: float = 0.0
    """Σw(w-1): the phase-1 variance of a Poisson sample, 0 where every span is evaluated."""
    selected: int = 0
    labelled: int = 0
    label_weight: float = 0.0
    """Σ w/π over labelled spans."""
    label_weight_squared: float = 0.0
    hallucinated_label_weight: float = 0.0
    """Σ (w/π)·y over labelled spans (y: 1 where its reviewers' majority says hallucinated)."""
    label_weight_by_reviewers: dict[int, float] = field(default_factory=dict)
    """Σ w/π over labelled spans by how many reviewers' decided labels made their majority."""
    lowest_probability: float = math.inf
    """The least π its evaluated spans were selected with."""
    highest_probability: float = -math.inf
    reviewer_pairs: int = 0
    """Pairs of decided labels by two reviewers on one span."""
    disagreeing_pairs: int = 0

    def add_evaluated(self, weight: float, count: int = 1, probability: float = math.nan) -> None:
        """`count` evaluated spans of weight 1/r, selected with `probability` π."""
        self.evaluated += count
        self.weight += count * weight
        self.weight_excess += count * weight * (weight - 1)
        if not math.isnan(probability):
            self.lowest_probability = min(self.lowest_probability, probability)
            self.highest_probability = max(self.highest_probability, probability)

    def add_selected(self, count: int = 1) -> None:
        self.selected += count

    def add_label(
        self,
        weight: float,
        probability: float,
        hallucinated: bool,
        count: int = 1,
        reviewers: int = 1,
    ) -> None:
        """A selected span's human label: its `reviewers`' majority (a tie stays pending)."""
        v = weight / probability
        self.labelled += count
        self.label_weight += count * v
        self.label_weight_squared += count * v * v
        self.hallucinated_label_weight += count * v * hallucinated
        by = self.label_weight_by_reviewers
        by[reviewers] = by.get(reviewers, 0.0) + count * v

    def add_pairs(self, pairs: int, disagreeing: int) -> None:
        """Two reviewers' decided labels on one span, `pairs` times, `disagreeing` of them apart."""
        self.reviewer_pairs += pairs
        self.disagreeing_pairs += disagreeing

    @property
    def probability(self) -> float | None:
        """The one π all its evaluated spans were selected with; None if several or unknown."""
        if self.lowest_probability == self.highest_probability:
            return self.lowest_probability
        return None

    def merge(self, other: StratumTotals) -> None:
        self.evaluated += other.evaluated
        self.weight += other.weight
        self.weight_excess += other.weight_excess
        self.selected += other.selected
        self.labelled += other.labelled
        self.label_weight += other.label_weight
        self.label_weight_squared += other.label_weight_squared
        self.hallucinated_label_weight += other.hallucinated_label_weight
        for reviewers, v in other.label_weight_by_reviewers.items():
            by = self.label_weight_by_reviewers
            by[reviewers] = by.get(reviewers, 0.0) + v
        self.lowest_probability = min(self.lowest_probability, other.lowest_probability)
        self.highest_probability = max(self.highest_probability, other.highest_probability)
        self.reviewer_pairs += other.reviewer_pairs
        self.disagreeing_pairs += other.disagreeing_pairs

    @property
    def pending(self) -> int:
        return max(0, self.selected - self.labelled)

    @property
    def response_rate(self) -> float | None:
        """Labelled / selected: the estimate assumes the labelled are a random subset."""
        return self.labelled / self.selected if self.selected else None


@dataclass(frozen=True, slots=True)
class StratumEstimate:
    """One stratum's share of the weight and the people's rate in it."""

    stratum: Stratum
    share: float
    """N̂_h / N̂"""
    rate: float
    """ȳ_h (where nothing is labelled: the rate of its verdict's labelled strata)."""
    lower: float
    upper: float
    labelled: int
    pending: int
    response_rate: float | None
    interval_n: float
    """The effective sample size of its Wilson interval."""


@dataclass(frozen=True, slots=True)
class Bounded:
    """A figure with its interval; None where it cannot be estimated."""

    value: float | None
    lower: float
    upper: float


@dataclass(frozen=True, slots=True)
class Corrected:
    """The corrected rate over a window, or why it is withheld, and what would narrow it."""

    rate: float | None
    lower: float
    upper: float
    withheld: str | None
    """Why the figure is not shown (too few labels in a heavy stratum); None when shown."""
    strata: tuple[StratumEstimate, ...]
    sensitivity: Bounded
    """Of the spans people call hallucinated, the share the evaluator flags."""
    specificity: Bounded
    """Of the spans people call factual, the share the evaluator passes."""
    evaluator_rate: float | None
    """The evaluator's own weighted rate over the same spans, for comparison."""
    labels: int
    pending: int
    notes: tuple[str, ...] = ()
    labels_needed: Mapping[Stratum, int] = field(default_factory=dict)
    """More labels per stratum to bring the half-width to the target, best allocated."""
    target_half_width: float = 0.0
    reviewer_error: Bounded = Bounded(None, 0.0, 0.5)
    """The chance a reviewer's label is wrong, from doubly labelled spans; None unmeasured."""

    @property
    def shown(self) -> bool:
        return self.withheld is None and self.rate is not None

    @property
    def response_rate(self) -> float | None:
        selected = self.labels + self.pending
        return self.labels / selected if selected else None


MIN_RESPONSE_RATE = 0.8
"""Below it, the note says the estimate leans on the missing labels being like the rest."""


def corrected(
    totals: Mapping[Stratum, StratumTotals],
    confidence: float = 0.95,
    min_labels: int = 30,
    min_share: float = 0.05,
    target_half_width: float = 0.02,
) -> Corrected:
    """The corrected rate of `totals` (one evaluator's strata over one window)."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    total = sum(t.weight for t in totals.values())
    labels = sum(t.labelled for t in totals.values())
    pending = sum(t.pending for t in totals.values())
    if total <= 0:
        empty = Bounded(None, 0.0, 1.0)
        return Corrected(
            None, 0.0, 1.0, "no evaluated spans", (), empty, empty, None, labels, pending
        )
    strata = _estimates(totals, total, z)
    pooled = pooled_strata(totals, min_labels)
    used = _estimates(pooled, total, z)
    labels_rate = sum(s.share * s.rate for s in used)
    between = _between(used, pooled, labels_rate, total)
    spread = z * z * between  # on the scale of the squared distances to the bounds
    lower = labels_rate - math.sqrt(sum((s.share * (s.rate - s.lower)) ** 2 for s in used) + spread)
    upper = labels_rate + math.sqrt(sum((s.share * (s.upper - s.rate)) ** 2 for s in used) + spread)
    lower, upper = max(0.0, min(labels_rate, lower)), min(1.0, max(labels_rate, upper))
    error = reviewer_error(totals, z)
    rate, lower, upper = _denoised(labels_rate, lower, upper, majority_error(used, pooled, error))
    flagged = sum(s.share for s in strata if s.stratum.verdict == VERDICT_HALLUCINATED)
    judged = sum(s.share for s in strata if s.stratum.verdict != VERDICT_NONE)
    return Corrected(
        rate,
        lower,
        upper,
        _withheld(used, labels, min_labels, min_share),
        strata,
        _agreement(strata, VERDICT_HALLUCINATED, positive=True),
        _agreement(strata, VERDICT_FACTUAL, positive=False),
        flagged / judged if judged > 0 else None,
        labels,
        pending,
        _notes(labels, pending, strata, used, error),
        labels_needed(strata, between, z, target_half_width),
        target_half_width,
        error,
    )


def _estimates(
    totals: Mapping[Stratum, StratumTotals], total: float, z: float
) -> tuple[StratumEstimate, ...]:
    return tuple(
        _stratum(stratum, t, total, z, _pooled(totals, stratum.verdict))
        for stratum, t in sorted(totals.items())
        if t.weight > 0
    )


def _between(
    used: tuple[StratumEstimate, ...],
    totals: Mapping[Stratum, StratumTotals],
    rate: float,
    total: float,
) -> float:
    """The phase-1 spread between strata: how the evaluated spans happened to fall in them."""
    return sum(totals[s.stratum].weight_excess * (s.rate - rate) ** 2 for s in used) / (
        total * total
    )


def _notes(
    labels: int,
    pending: int,
    strata: tuple[StratumEstimate, ...],
    used: tuple[StratumEstimate, ...],
    error: Bounded,
) -> tuple[str, ...]:
    notes = []
    response = labels / (labels + pending) if labels + pending else None
    if response is not None and response < MIN_RESPONSE_RATE:
        notes.append(
            f"{response:.0%} of the selected spans are labelled: the figure assumes the "
            "labelled ones are a random subset of the selected ones in each stratum"
        )
    merged = [str(s.stratum) for s in used if s.stratum not in {t.stratum for t in strata}]
    if merged:
        notes.append(
            f"estimated together (one review probability, too few labels apart): "
            f"{', '.join(merged)}"
        )
    if error.value is None:
        notes.append(
            "no span has two reviewers' labels, so the reviewers' own error is not "
            "measured: the figure is the rate their labels give"
        )
    else:
        notes.append(
            f"reviewers err on {error.value:.1%} [{error.lower:.1%}, {error.upper:.1%}] of "
            "labels, from their disagreements (taken as independent and alike for both "
            "answers); the figure is corrected for it"
        )
    return tuple(notes)


def pooled_strata(
    totals: Mapping[Stratum, StratumTotals], min_labels: int
) -> dict[Stratum, StratumTotals]:
    """The strata the estimate uses: thin ones that share one π with others, pooled.

    Strata whose spans were all selected with the same π are one random sample of their
    evaluated spans together (uniform review is one), so they can be estimated as one
    (post-stratification collapsing thin strata, Särndal et al. 7.10). Where one of them
    is thin, a group's verdicts are pooled first, then the groups. Thin is foremost
    expecting too few labels (π times its evaluated spans below `label_floor`, which falls
    short of `min_labels` one time in a hundred): a decision on how many labels came
    would lean the pooled rate toward the other strata's (given fewer labels than
    expected in one), so it only decides in that rare remainder. Never the labels' values.
    """
    out: dict[Stratum, StratumTotals] = {}
    by_probability: dict[float, list[Stratum]] = {}
    for stratum, t in totals.items():
        if t.weight <= 0:
            continue
        if t.probability is None or t.probability <= 0:
            out[stratum] = t
        else:
            by_probability.setdefault(t.probability, []).append(stratum)
    for members in by_probability.values():
        by_group: dict[str, list[Stratum]] = {}
        for stratum in members:
            by_group.setdefault(stratum.group, []).append(stratum)
        level: dict[Stratum, StratumTotals] = {}
        for group in by_group.values():
            level |= _pool({h: totals[h] for h in group}, min_labels)
        out |= _pool(level, min_labels)
    return out


def _pool(totals: Mapping[Stratum, StratumTotals], min_labels: int) -> dict[Stratum, StratumTotals]:
    """`totals` as they are, or as one stratum where one of several is thin."""
    floor = label_floor(min_labels)
    thin = [t for t in totals.values() if _expected_labels(t) < floor or t.labelled < min_labels]
    if len(totals) < 2 or not thin:
        return dict(totals)
    whole = StratumTotals()
    for t in totals.values():
        whole.merge(t)
    groups = sorted({h.group for h in totals})
    verdicts = sorted({v for h in totals for v in h.verdict.split("+")})
    return {Stratum("+".join(groups), "+".join(verdicts)): whole}


def _expected_labels(t: StratumTotals) -> float:
    return (t.probability or 0.0) * t.evaluated


def reviewer_error(totals: Mapping[Stratum, StratumTotals], z: float) -> Bounded:
    """The chance a reviewer's label is wrong, from how often two reviewers disagree.

    With errors independent and alike for hallucinated and factual spans (chance e), two
    labels of one span disagree with chance d = 2e(1-e), so e = (1 - √(1-2d))/2; its
    interval maps Wilson's for d. None where no span has two reviewers' labels.
    """
    pairs = sum(t.reviewer_pairs for t in totals.values())
    if pairs == 0:
        return Bounded(None, 0.0, 0.5)
    apart = sum(t.disagreeing_pairs for t in totals.values()) / pairs
    low, high = wilson(apart, pairs, z)
    return Bounded(_error(apart), _error(low), _error(high))


def _error(disagreement: float) -> float:
    return (1 - math.sqrt(max(0.0, 1 - 2 * disagreement))) / 2


def majority_error(
    used: tuple[StratumEstimate, ...], totals: Mapping[Stratum, StratumTotals], error: Bounded
) -> Bounded:
    """The chance a span's label (its reviewers' majority) is wrong, given a reviewer's `error`.

    A majority of k labels errs with chance P(more than k/2 wrong) / P(no tie), less than
    one label's e where k > 1 (two that agree: e²/(e² + (1-e)²)); a tie stays pending,
    which leaves the labelled spans a random subset, errors being alike for both answers.
    The strata's labels mix k by their weight, averaged as the strata combine.
    """
    if error.value is None:
        return error
    mix: dict[int, float] = {}
    for s in used:
        t = totals[s.stratum]
        if t.label_weight > 0:
            for k, v in t.label_weight_by_reviewers.items():
                mix[k] = mix.get(k, 0.0) + s.share * v / t.label_weight
    mass = sum(mix.values())
    if mass <= 0:
        return error

    def mixed(e: float) -> float:
        return sum(v * _majority_wrong(k, e) for k, v in mix.items()) / mass

    return Bounded(mixed(error.value), mixed(error.lower), mixed(error.upper))


def _majority_wrong(reviewers: int, e: float) -> float:
    """P(the majority of `reviewers` labels, each wrong with chance e, is wrong | no tie)."""

    def exactly(wrong: int) -> float:
        return math.comb(reviewers, wrong) * e**wrong * (1 - e) ** (reviewers - wrong)

    tie = exactly(reviewers // 2) if reviewers % 2 == 0 else 0.0
    wrong = sum(exactly(j) for j in range(reviewers // 2 + 1, reviewers + 1))
    return wrong / (1 - tie) if tie < 1 else 0.5


def _denoised(
    rate: float, lower: float, upper: float, error: Bounded
) -> tuple[float, float, float]:
    """The true rate p = (q - e)/(1 - 2e) from the labels' rate q and the error e.

    Its bounds combine q's and e's (independent estimates) by MOVER: p rises with q, and
    falls with e while q is below one half. Unchanged where e is not measured.
    """
    if error.value is None:
        return rate, lower, upper
    e = error.value
    if error.upper >= 0.5:  # the labels may carry nothing of the truth
        return (min(1.0, max(0.0, _true(rate, e))) if e < 0.5 else rate), 0.0, 1.0
    point = min(1.0, max(0.0, _true(rate, e)))
    toward_low, toward_high = (
        (error.upper, error.lower) if rate < 0.5 else (error.lower, error.upper)
    )
    low = _true(rate, e) - math.hypot(
        _true(rate, e) - _true(lower, e), _true(rate, e) - _true(rate, toward_low)
    )
    high = _true(rate, e) + math.hypot(
        _true(upper, e) - _true(rate, e), _true(rate, toward_high) - _true(rate, e)
    )
    return point, max(0.0, min(point, low)), min(1.0, max(point, high))


def _true(labels_rate: float, error: float) -> float:
    return (labels_rate - error) / (1 - 2 * error)


def _pooled(totals: Mapping[Stratum, StratumTotals], verdict: str) -> float:
    """The people's rate over the labelled spans of `verdict`'s strata, else of all, else 1/2.

    The point of a stratum without labels (its interval is [0, 1]): collapsing it into its
    verdict's other strata keeps the point estimate close while the interval stays valid.
    """
    for same in (True, False):
        chosen = [t for h, t in totals.items() if not same or h.verdict == verdict]
        weight = sum(t.label_weight for t in chosen)
        if weight > 0:
            return sum(t.hallucinated_label_weight for t in chosen) / weight
    return 0.5


def _stratum(
    stratum: Stratum, t: StratumTotals, total: float, z: float, pooled: float
) -> StratumEstimate:
    share = t.weight / total
    if t.labelled == 0 or t.label_weight <= 0:
        return StratumEstimate(stratum, share, pooled, 0.0, 1.0, 0, t.pending, t.response_rate, 0.0)
    rate = t.hallucinated_label_weight / t.label_weight
    # Var(ȳ_h) = ȳ(1-ȳ)·c: phase 2 (labels drawn from the evaluated spans, with Kish's
    # design effect of unequal w/π) and phase 1 (the evaluated spans drawn from the traffic).
    sampled = min(1.0, t.labelled / t.evaluated) if t.evaluated else 1.0
    design_effect = t.labelled * t.label_weight_squared / t.label_weight**2
    c = (1 - sampled) * design_effect / t.labelled + t.weight_excess / t.weight**2
    if c <= 0:  # every span of the traffic in it evaluated and labelled: known exactly
        return StratumEstimate(
            stratum, share, rate, rate, rate, t.labelled, t.pending, t.response_rate, math.inf
        )
    lower, upper = rate_interval(rate, 1 / c, z)
    return StratumEstimate(
        stratum, share, rate, lower, upper, t.labelled, t.pending, t.response_rate, 1 / c
    )


SMALL_COUNT = 5.0
"""Below this many (effective) hallucinations, Wilson's lower bound sits too high."""


def rate_interval(rate: float, n: float, z: float) -> tuple[float, float]:
    """Wilson's interval, its bounds no further out than Poisson ones for few events.

    Wilson's lower bound undercovers when the count x = rate·n is small (Brown, Cai and
    DasGupta 2001 modify it for x ≤ 3 with a Poisson bound); here it is capped by the
    one-sided Poisson bound Γ⁻¹(α; x)/n below `SMALL_COUNT` events. Not the two-sided
    exact one, Γ⁻¹(α/2; x)/n: combined across strata that one left the rate's interval
    covering over 99% of the time wherever a heavy stratum showed one to four
    hallucinations (tests/review/test_simulation.py). Where none is seen, the upper
    bound is the Poisson mid-p one, -ln(α)/n (3.0/n; Wilson's is 3.84/(n + 3.84), the
    exact one 3.7/n); for a count above 0 mid-p undercovered where the count is an
    effective one (mixed evaluation, 2,000 labels: 92.9%), so Wilson's stays.
    """
    lower, upper = wilson(rate, n, z)
    events = rate * n
    tail = 2 * (1 - NormalDist().cdf(z))
    if 0 < events < SMALL_COUNT:
        lower = min(lower, _gamma_quantile(events, tail) / n)
    if events == 0:  # the mid-p bound: e^(-λ)/2 = α/2
        upper = min(upper, -math.log(tail) / n)
    return lower, upper


def _gamma_quantile(shape: float, probability: float) -> float:
    """The `probability` quantile of Gamma(shape, 1), by bisection on its CDF."""
    low, high = 0.0, shape + 10 * math.sqrt(shape) + 10
    for _ in range(60):
        middle = (low + high) / 2
        if _gamma_cdf(shape, middle) < probability:
            low = middle
        else:
            high = middle
    return low


def _gamma_cdf(shape: float, x: float) -> float:
    """The regularised lower incomplete gamma P(shape, x), by its series (x small here)."""
    if x <= 0:
        return 0.0
    term = total = 1.0 / shape
    k = shape
    while term > total * 1e-12:
        k += 1
        term *= x / k
        total += term
    return min(1.0, total * math.exp(-x + shape * math.log(x) - math.lgamma(shape)))


def _withheld(
    strata: tuple[StratumEstimate, ...], labels: int, min_labels: int, min_share: float
) -> str | None:
    """The reason the design cannot support a figure yet (never the labels' values)."""
    if labels == 0:
        return "no labels yet"
    thin = [s for s in strata if s.share >= min_share and s.labelled < min_labels]
    if not thin:
        return None
    return "; ".join(
        f"stratum {s.stratum} ({s.share:.0%} of the weight) has {s.labelled} of the "
        f"{min_labels} labels it needs"
        for s in thin
    )


def _agreement(strata: tuple[StratumEstimate, ...], verdict: str, *, positive: bool) -> Bounded:
    """Sensitivity (positive) or specificity, weighted by 1/(r·π) through the strata.

    Sensitivity = Σ_H a·ȳ / Σ_{H,F} a·ȳ; specificity the same with 1-ȳ and F. Its bounds
    take each sum's MOVER bound in the direction that moves the ratio (conservative).
    """
    judged = [s for s in strata if s.stratum.verdict != VERDICT_NONE]

    def sums(ss: list[StratumEstimate]) -> tuple[float, float, float]:
        if positive:
            terms = [(s.share, s.rate, s.lower, s.upper) for s in ss]
        else:
            terms = [(s.share, 1 - s.rate, 1 - s.upper, 1 - s.lower) for s in ss]
        point = sum(a * y for a, y, _, _ in terms)
        low = point - math.sqrt(sum((a * (y - lo)) ** 2 for a, y, lo, _ in terms))
        high = point + math.sqrt(sum((a * (hi - y)) ** 2 for a, y, _, hi in terms))
        return point, max(0.0, low), high

    hit = sums([s for s in judged if s.stratum.verdict == verdict])
    miss = sums([s for s in judged if s.stratum.verdict != verdict])
    if not any(s.labelled for s in judged) or hit[0] + miss[0] <= 0:
        return Bounded(None, 0.0, 1.0)
    value = hit[0] / (hit[0] + miss[0])
    lower = hit[1] / (hit[1] + miss[2]) if hit[1] + miss[2] > 0 else 0.0
    upper = hit[2] / (hit[2] + miss[1]) if hit[2] + miss[1] > 0 else 1.0
    return Bounded(value, min(value, lower), max(value, min(1.0, upper)))


def labels_needed(
    strata: tuple[StratumEstimate, ...], between: float, z: float, half_width: float
) -> dict[Stratum, int]:
    """More labels per stratum that would bring the half-width to `half_width`.

    Each stratum's spread is taken at the point of its interval nearest one half (its
    Wilson upper bound when that is below, never an observed 0), the labels allocated in
    proportion to share x spread (Neyman). A target the evaluated spans alone cannot
    reach (the phase-1 spread) asks for every stratum's labels to be doubled at least.
    """
    spreads = {s.stratum: math.sqrt(_nearest_half(s) * (1 - _nearest_half(s))) for s in strata}
    mass = sum(s.share * spreads[s.stratum] for s in strata)
    room = half_width * half_width / (z * z) - between
    if mass <= 0:
        return {}
    if room <= 0:
        return {s.stratum: max(1, s.labelled) for s in strata}
    needed = mass * mass / room
    return {
        s.stratum: max(0, math.ceil(needed * s.share * spreads[s.stratum] / mass) - s.labelled)
        for s in strata
    }


def _nearest_half(s: StratumEstimate) -> float:
    return min(max(0.5, s.lower), s.upper)
