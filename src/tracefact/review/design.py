"""Which evaluated spans people review: a random sample with a known probability per stratum.

The probabilities come from configuration, or from a labels-per-day budget allocated by
Neyman (labels in proportion to N_h·S_h, each stratum's spread S_h taken at a conservative
rate, since the worker sees no labels), recomputed at most hourly from the past day's
evaluated spans. Never a fixed half-and-half between verdicts: with an evaluator that flags
few spans that is wider than uniform sampling. A stratum heavy enough to be checked before
a figure is shown gets a floor of labels first, so that the figure is rarely withheld.
Rules without a known probability ("the first k per hour") cannot be expressed here.

`ReviewSampler.select` runs on the evaluation worker after the verdict, never on an
application thread, and only for evaluated spans; the decision travels in the verdict's
attributes, which each host applies.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracefact import semconv
from tracefact._clock import SYSTEM, Clock
from tracefact.conventions.groups import group_value
from tracefact.conventions.results import read_results
from tracefact.review.strata import Stratum

HOUR = 3600.0
DAY = 24 * HOUR

DEFAULT_ASSUMED_RATES: Mapping[str, float] = {
    semconv.REVIEW_VERDICT_HALLUCINATED: 0.5,
    semconv.REVIEW_VERDICT_FACTUAL: 0.2,
    semconv.REVIEW_VERDICT_NONE: 0.5,
}
"""Conservative hallucination rates per verdict for the allocation (spread near its most)."""


MIN_EXPECTED_LABELS = 10.0
"""Every stratum's least expected labels, budget allowing.

Neyman at conservative rates gives a light stratum of flagged spans a handful of labels,
and its Wilson interval (±0.3 or more at 3 labels) then decides the figure's bounds while
the heavy stratum's labels see no hallucination: with a near-perfect evaluator at a 2% rate
the interval covered 99.6% of the time, over the 99% ceiling. At 10 labels it covers
98.3% there, and the floor costs a 200-label budget at most a fifth of its labels.
"""


def label_floor(min_labels: int) -> float:
    """Expected labels that leave fewer than `min_labels` in under one draw in a hundred."""
    return min_labels + 3 * math.sqrt(min_labels)


@dataclass(frozen=True, slots=True)
class StratumSize:
    """What the allocation knows of a stratum: its weight and its evaluated spans."""

    weight: float
    """Σw = Σ 1/r over its evaluated spans: the traffic it stands for."""
    evaluated: float
    """Its evaluated spans (the most it can give labels)."""


def allocate(
    budget: float,
    sizes: Mapping[Stratum, StratumSize],
    assumed_rates: Mapping[str, float] = DEFAULT_ASSUMED_RATES,
    min_labels: int = 30,
    min_share: float = 0.05,
) -> dict[Stratum, float]:
    """Selection probability per stratum for `budget` expected labels over `sizes`.

    Neyman allocation (n_h ∝ N_h·S_h), no stratum above its evaluated spans, and each
    stratum near `min_share` of the weight or above it given `label_floor(min_labels)`
    first (scaled down together when the budget cannot cover every floor).
    """
    live = {h: s for h, s in sizes.items() if s.evaluated > 0 and s.weight > 0}
    total = sum(s.weight for s in live.values())
    if budget <= 0 or total <= 0:
        return dict.fromkeys(sizes, 0.0)
    mass = {
        h: s.weight / total * _spread(assumed_rates.get(h.verdict, 0.5)) for h, s in live.items()
    }
    # Every stratum some labels (an unlabelled one is only bounded by [0, 1]), then the
    # floors of the heavy ones, then Neyman for the rest.
    least = {h: min(s.evaluated, MIN_EXPECTED_LABELS) for h, s in live.items()}
    least = _within(least, budget)
    heavy = {
        h: max(least[h], min(label_floor(min_labels), s.evaluated))
        if s.weight / total >= min_share / 2
        else least[h]
        for h, s in live.items()
    }
    floors = {
        h: least[h] + extra
        for h, extra in _within(
            {h: heavy[h] - least[h] for h in live}, budget - sum(least.values())
        ).items()
    }
    fixed: dict[Stratum, float] = {}
    while True:  # each pass fixes at least one stratum at its cap or floor, or ends
        free = [h for h in live if h not in fixed]
        left = max(0.0, budget - sum(fixed.values()))
        free_mass = sum(mass[h] for h in free)
        wanted = {
            h: left * mass[h] / free_mass if free_mass > 0 else left / len(free) for h in free
        }
        over = {h: live[h].evaluated for h in free if wanted[h] > live[h].evaluated}
        under = {h: floors[h] for h in free if wanted[h] < floors[h]}
        if not over and not under:
            break
        fixed.update(over or under)
        if len(fixed) == len(live):
            wanted = {}
            break
    labels = {**wanted, **fixed}
    return {
        h: min(1.0, labels.get(h, 0.0) / live[h].evaluated) if h in live else 0.0 for h in sizes
    }


def _within(labels: dict[Stratum, float], budget: float) -> dict[Stratum, float]:
    """`labels` scaled down together to fit `budget`."""
    wanted = sum(labels.values())
    if wanted <= budget or wanted <= 0:
        return labels
    return {h: n * max(0.0, budget) / wanted for h, n in labels.items()}


def _spread(rate: float) -> float:
    rate = min(max(rate, 0.0), 1.0)
    return math.sqrt(rate * (1 - rate))


def selected(span_id: int, probability: float, person: bytes = b"tf.review") -> bool:
    """Whether a span is selected: a hash of its id below its probability.

    Deterministic (a replayed span is selected alike), independent of the evaluation
    sampler's draw on the trace id; another `person` gives an independent draw (a second
    reviewer).
    """
    if probability >= 1.0:
        return True
    digest = hashlib.blake2b(span_id.to_bytes(8, "big"), digest_size=8, person=person).digest()
    return int.from_bytes(digest, "big") / 2.0**64 < probability


class ReviewSampler:
    """Selects evaluated spans for review, per stratum, with a probability it records.

    With `probabilities` (stratum text or verdict → π) those are used as they are; with a
    `labels_per_day` budget they are allocated from the past day's evaluated spans, at most
    once an hour (`initial_probability` until the first hour has passed). Thread-safe.
    """

    def __init__(
        self,
        *,
        probabilities: Mapping[str, float] | None = None,
        labels_per_day: float | None = None,
        group_by: Sequence[str] = (),
        assumed_rates: Mapping[str, float] = DEFAULT_ASSUMED_RATES,
        min_labels: int = 30,
        min_share: float = 0.05,
        initial_probability: float = 0.05,
        double_share: float = 0.0,
        clock: Clock = SYSTEM,
    ) -> None:
        if (probabilities is None) == (labels_per_day is None):
            raise ValueError("give review probabilities or a labels_per_day budget, one of them")
        self.probabilities = dict(probabilities or {})
        self.labels_per_day = labels_per_day
        self.group_by = tuple(group_by)
        self.assumed_rates = dict(assumed_rates)
        self.min_labels = min_labels
        self.min_share = min_share
        self.initial_probability = initial_probability
        self.double_share = double_share
        self.clock = clock
        # The lock guards the hourly counts and the allocation; every step is a few sums.
        self._lock = threading.Lock()
        self._hours: dict[int, dict[Stratum, list[float]]] = {}
        self._allocated: dict[Stratum, float] = {}
        self._allocated_at: float | None = None
        self._started = clock.now()

    def stratum(self, attributes: Mapping[str, Any], resource: Mapping[str, Any]) -> Stratum:
        """The span's stratum from its final attributes (the first evaluator's verdict)."""
        group = "|".join(group_value(name, attributes, resource) for name in self.group_by)
        return Stratum(group, verdict_of(attributes)[1])

    def probability(self, stratum: Stratum) -> float:
        """π for a span of `stratum` now."""
        if self.labels_per_day is None:
            text = str(stratum)
            for key in (text, stratum.verdict):
                if key in self.probabilities:
                    return self.probabilities[key]
            return self.probabilities.get("*", 0.0)
        with self._lock:
            self._reallocate()
            return self._allocated.get(stratum, self.initial_probability)

    def select(
        self,
        span_id: int,
        weight: float,
        attributes: Mapping[str, Any],
        resource: Mapping[str, Any],
    ) -> dict[str, Any]:
        """The review attributes for an evaluated span of weight 1/r (counted for the budget)."""
        stratum = self.stratum(attributes, resource)
        if self.labels_per_day is not None:
            with self._lock:
                hour = math.floor(self.clock.now() / HOUR)
                sums = self._hours.setdefault(hour, {}).setdefault(stratum, [0.0, 0.0])
                sums[0] += weight
                sums[1] += 1
        probability = self.probability(stratum)
        chosen = selected(span_id, probability)
        review: dict[str, Any] = {
            semconv.REVIEW_EVALUATOR: verdict_of(attributes)[0],
            semconv.REVIEW_STRATUM: str(stratum),
            semconv.REVIEW_PROBABILITY: probability,
            semconv.REVIEW_SELECTED: chosen,
        }
        if self.double_share > 0 and chosen:
            review[semconv.REVIEW_SECOND_REVIEWER] = selected(
                span_id, self.double_share, b"tf.review.2"
            )
        return review

    def _reallocate(self) -> None:
        """Allocate the day's budget from the past day's counts, once an hour at most."""
        now = self.clock.now()
        if now - self._started < HOUR:
            return
        if self._allocated_at is not None and now - self._allocated_at < HOUR:
            return
        this_hour = math.floor(now / HOUR)
        for old in [h for h in self._hours if h <= this_hour - 24]:
            del self._hours[old]
        seen = min(DAY, now - self._started)
        scale = DAY / seen
        sizes: dict[Stratum, list[float]] = {}
        for hour in self._hours.values():
            for stratum, (weight, count) in hour.items():
                acc = sizes.setdefault(stratum, [0.0, 0.0])
                acc[0] += weight * scale
                acc[1] += count * scale
        assert self.labels_per_day is not None
        self._allocated = allocate(
            self.labels_per_day,
            {h: StratumSize(w, n) for h, (w, n) in sizes.items()},
            self.assumed_rates,
            self.min_labels,
            self.min_share,
        )
        self._allocated_at = now


def verdict_of(attributes: Mapping[str, Any]) -> tuple[str, str]:
    """(evaluator, stratum verdict) of the span's first evaluator."""
    results = read_results(attributes)
    if results is None or not results.evaluators:
        return semconv.EVALUATOR_UNKNOWN, semconv.REVIEW_VERDICT_NONE
    name, result = next(iter(results.evaluators.items()))
    if result.hallucinated is None:
        return name, semconv.REVIEW_VERDICT_NONE
    verdict = (
        semconv.REVIEW_VERDICT_HALLUCINATED
        if result.hallucinated
        else semconv.REVIEW_VERDICT_FACTUAL
    )
    return name, verdict
