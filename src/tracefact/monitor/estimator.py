"""The hallucination rate of all traffic, estimated from the spans that were evaluated.

A span evaluated with probability r stands for 1/r spans of the traffic, so each
verdict y (1 = hallucinated) counts with weight w = 1/r, and the rate is Σw·y / Σw
(unbiased whatever mix of rates the sampler used, as long as each span carries its
own). The 95% interval is Wilson's, on an effective sample size: with equal weights
that is n and the interval is exactly Wilson's; with mixed weights it is the n for
which p(1-p)/n equals the estimate's linearised variance Σw²(y-p)²/(Σw)² (Korn and
Graubard's effective sample size), but no more than the geometric mean of that and
Kish's (Σw)²/Σw². Kish's alone ignores how the verdicts fall across weights: a rule
that evaluates a risky route fully and the rest at 1% makes it far too pessimistic,
the opposite mix too optimistic. The variance-based n alone trusts a variance resting
on the few verdicts of heavily weighted spans, and with a handful of hallucinations
among them its interval is too narrow; where it claims more than Kish's, half that
gain (on a log scale) is kept. Kish's is reported as `n_eff`, the evidence an alert
should ask for. tests/monitor/test_simulation.py measures the coverage.

Everything here adds up: a window is a sum of buckets, a fleet a sum of processes.
Prometheus computes the same from the counters of `tracefact.monitor.*` (the recording
rules in collector/prometheus/). Pure Python, no OpenTelemetry: usable offline on a
file of spans, and by the live monitor.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from types import MappingProxyType

from tracefact import semconv
from tracefact.conventions.groups import group_value
from tracefact.conventions.results import EvaluatorResult, SpanResults, read_results

_NOTHING: Mapping[str, object] = MappingProxyType({})

Group = tuple[str, ...]
"""A group's values, in the order of the estimator's `group_by`."""


@dataclass(frozen=True, slots=True)
class Observation:
    """One evaluator's outcome on one sampled span."""

    evaluator: str
    group: Group
    weight: float
    """1 / the span's sample rate."""
    status: str
    """ok, or why there is no verdict (semconv.UNJUDGED_STATUSES)."""
    hallucinated: bool | None
    """The verdict, for status ok."""
    time: float
    """Unix seconds (the span's end, or when it was seen)."""


@dataclass(slots=True)
class Totals:
    """Sums over judged observations, and counts of unjudged ones; they add up."""

    judged: int = 0
    hallucinated: int = 0
    weight: float = 0.0
    """Σw"""
    hallucinated_weight: float = 0.0
    """Σw·y"""
    weight_squared: float = 0.0
    """Σw²"""
    hallucinated_weight_squared: float = 0.0
    """Σw²·y"""
    unjudged: Counter[str] = field(default_factory=Counter)
    """Sampled spans without a verdict, by status."""

    def add(self, observation: Observation, count: int = 1) -> None:
        """Count `observation` `count` times."""
        if count == 0:
            return
        if observation.status != semconv.STATUS_OK or observation.hallucinated is None:
            self.unjudged[observation.status] += count
            return
        w = observation.weight
        self.judged += count
        self.weight += count * w
        self.weight_squared += count * w * w
        if observation.hallucinated:
            self.hallucinated += count
            self.hallucinated_weight += count * w
            self.hallucinated_weight_squared += count * w * w

    def merge(self, other: Totals) -> None:
        self.judged += other.judged
        self.hallucinated += other.hallucinated
        self.weight += other.weight
        self.hallucinated_weight += other.hallucinated_weight
        self.weight_squared += other.weight_squared
        self.hallucinated_weight_squared += other.hallucinated_weight_squared
        self.unjudged.update(other.unjudged)


@dataclass(frozen=True, slots=True)
class Interval:
    """A rate with its confidence interval; rate None when nothing was judged."""

    rate: float | None
    lower: float
    upper: float
    n_eff: float
    """Kish's effective sample size, (Σw)²/Σw²: how much evidence, whatever the verdicts."""
    interval_n: float
    """The effective sample size the interval used (see the module's docstring)."""


def wilson(rate: float, n: float, z: float) -> tuple[float, float]:
    """Wilson's score interval for a proportion `rate` observed over `n` (not integer).

    It always holds `rate`; at 0 or 1 rounding would put a bound a hair past it.
    """
    if n <= 0:
        return 0.0, 1.0
    z2n = z * z / n
    centre = (rate + z2n / 2) / (1 + z2n)
    half = z * math.sqrt(rate * (1 - rate) / n + z2n / (4 * n)) / (1 + z2n)
    return max(0.0, min(rate, centre - half)), min(1.0, max(rate, centre + half))


def interval(totals: Totals, confidence: float = 0.95) -> Interval:
    """The weighted rate of `totals` and its interval at `confidence`."""
    if totals.judged == 0 or totals.weight <= 0:
        return Interval(None, 0.0, 1.0, 0.0, 0.0)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    rate = totals.hallucinated_weight / totals.weight
    kish = totals.weight**2 / totals.weight_squared
    # Σw²(y-p)² with y in {0, 1}: (1-2p)·Σw²y + p²·Σw²
    spread = (1 - 2 * rate) * totals.hallucinated_weight_squared
    variance = (spread + rate * rate * totals.weight_squared) / totals.weight**2
    n = rate * (1 - rate) / variance if variance > 0 and 0 < rate < 1 else kish
    if n > kish:  # a gain over Kish's rests on few verdicts: keep half of it
        n = math.sqrt(n * kish)
    lower, upper = wilson(rate, n, z)
    return Interval(rate, lower, upper, kish, n)


@dataclass(frozen=True, slots=True)
class Estimate:
    """One evaluator's rate for one group over the window."""

    evaluator: str
    group: Mapping[str, str]
    """Group-by name to value."""
    totals: Totals
    interval: Interval

    @property
    def rate(self) -> float | None:
        return self.interval.rate

    @property
    def lower(self) -> float:
        return self.interval.lower

    @property
    def upper(self) -> float:
        return self.interval.upper

    @property
    def n_eff(self) -> float:
        return self.interval.n_eff

    @property
    def coverage(self) -> float | None:
        """Judged / sampled spans: the share of the sample the rate rests on."""
        sampled = self.totals.judged + sum(self.totals.unjudged.values())
        return self.totals.judged / sampled if sampled else None


class RateEstimator:
    """Windowed, per evaluator and group, weighted rates with intervals. Thread-safe.

    Memory is bounded: at most `max_groups` groups per evaluator (later ones pool into
    a group whose every value is `semconv.GROUP_OTHER`; a group idle for a whole window
    gives its place up), each with `window_seconds / bucket_seconds` buckets.

    Args:
        group_by: names in `semconv.GROUP_ALIASES` (model, service, route,
            prompt_version) or attribute names, read on the span, then its resource.
        max_groups: distinct groups kept apart, per evaluator.
        window_seconds: the sliding window the estimates cover.
        bucket_seconds: the window's step: it slides by whole buckets.
        evaluators: evaluator names known in advance; a span that failed as a whole
            (no per-evaluator status) counts as unjudged for each known or seen one.
        confidence: of the intervals.
        clock: the time of observations recorded with `add_span(..., time=None)`.
    """

    def __init__(
        self,
        group_by: Sequence[str] = ("service", "model"),
        max_groups: int = 50,
        window_seconds: float = 300.0,
        bucket_seconds: float = 10.0,
        evaluators: Sequence[str] = (),
        confidence: float = 0.95,
        clock: Callable[[], float] = time.time,
    ) -> None:
        _check(group_by, max_groups, window_seconds, bucket_seconds, confidence)
        self.group_by = tuple(group_by)
        self.max_groups = max_groups
        self.window_seconds = window_seconds
        self.bucket_seconds = bucket_seconds
        self.confidence = confidence
        self.clock = clock
        self._buckets = max(1, math.ceil(window_seconds / bucket_seconds))
        self._other: Group = (semconv.GROUP_OTHER,) * len(self.group_by)
        # One lock for all: observations come from the evaluation loop and application
        # threads, estimates from a metrics reader's thread; every step is a few sums.
        self._lock = threading.Lock()
        self._evaluators: dict[str, None] = dict.fromkeys(evaluators)
        self._windows: dict[tuple[str, Group], dict[int, Totals]] = {}
        self._last_seen: dict[tuple[str, Group], int] = {}
        self._newest = -math.inf

    # --- input -------------------------------------------------------------------
    def group_of(
        self, attributes: Mapping[str, object], resource: Mapping[str, object] = _NOTHING
    ) -> Group:
        """The span's group values, before the `max_groups` bound."""
        return tuple(group_value(name, attributes, resource) for name in self.group_by)

    def labels(self, group: Group) -> dict[str, str]:
        """A group as group-by name to value (metric attributes, report columns)."""
        return dict(zip(self.group_by, group, strict=True))

    def observations(
        self,
        attributes: Mapping[str, object],
        resource: Mapping[str, object] = _NOTHING,
        time: float | None = None,
    ) -> list[Observation]:
        """One observation per evaluator for an evaluated span's final attributes.

        Empty for a span not sampled, skipped, or whose sample rate is missing.
        """
        status = attributes.get(semconv.EVAL_STATUS)
        if status != semconv.STATUS_OK and status not in semconv.UNJUDGED_STATUSES:
            return []  # not sampled, or skipped: checked before reading the rest
        results = read_results(attributes)
        if results is None:
            return []
        return self.observations_of(results, attributes, resource, time)

    def observations_of(
        self,
        results: SpanResults,
        attributes: Mapping[str, object],
        resource: Mapping[str, object] = _NOTHING,
        time: float | None = None,
    ) -> list[Observation]:
        """One observation per evaluator for a span's results, its group from `attributes`.

        Empty for a span not sampled, skipped, or whose sample rate is missing.
        """
        status = results.status
        if status != semconv.STATUS_OK and status not in semconv.UNJUDGED_STATUSES:
            return []
        if results.weight is None:
            return []
        group = self.group_of(attributes, resource)
        when = self.clock() if time is None else time
        if results.evaluators:
            outcomes = {
                name: (_judged_status(result), result.hallucinated)
                for name, result in results.evaluators.items()
            }
        else:  # failed as a whole (dropped, loop blocked, shut down): every evaluator missed it
            with self._lock:
                names = list(self._evaluators) or [semconv.EVALUATOR_UNKNOWN]
            outcomes = {name: (results.status, None) for name in names}
        return [
            Observation(name, group, results.weight, outcome, verdict, when)
            for name, (outcome, verdict) in outcomes.items()
        ]

    def add_span(
        self,
        attributes: Mapping[str, object],
        resource: Mapping[str, object] = _NOTHING,
        time: float | None = None,
    ) -> list[Observation]:
        """Record an evaluated span; returns what was recorded, groups bounded."""
        return [self.add(o) for o in self.observations(attributes, resource, time)]

    def add(self, observation: Observation, count: int = 1) -> Observation:
        """Record `observation` `count` times; returns it with its group bounded.

        Observations older than the window (behind the newest one seen) are left out
        of the estimates. A weight that is not a positive number, a time that is not
        finite or a negative count raise ValueError.
        """
        if not (math.isfinite(observation.weight) and observation.weight > 0) or count < 0:
            raise ValueError(f"weight must be positive and count not negative: {observation}")
        if not math.isfinite(observation.time):
            raise ValueError(f"observation time must be finite: {observation}")
        index = math.floor(observation.time / self.bucket_seconds)
        with self._lock:
            self._evaluators.setdefault(observation.evaluator, None)
            self._newest = max(self._newest, index)
            key = self._admit(observation.evaluator, observation.group, index)
            if key[1] != observation.group:
                observation = _regrouped(observation, key[1])
            if index > self._newest - self._buckets:
                buckets = self._windows[key]
                buckets.setdefault(index, Totals()).add(observation, count)
                self._last_seen[key] = max(self._last_seen[key], index)
                for old in [i for i in buckets if i <= self._newest - self._buckets]:
                    del buckets[old]
        return observation

    def _admit(self, evaluator: str, group: Group, index: int) -> tuple[str, Group]:
        """The key `group` is kept under: its own, or the pooled one past `max_groups`."""
        key = (evaluator, group)
        if key in self._windows:
            return key
        own = [k for k in self._windows if k[0] == evaluator and k[1] != self._other]
        if len(own) >= self.max_groups:
            idle = [k for k in own if self._last_seen[k] <= self._newest - self._buckets]
            for stale in idle:
                del self._windows[stale], self._last_seen[stale]
            if len(own) - len(idle) >= self.max_groups:
                key = (evaluator, self._other)
        if key not in self._windows:
            self._windows[key] = {}
            self._last_seen[key] = index
        return key

    # --- output ------------------------------------------------------------------
    def estimates(self, now: float | None = None) -> list[Estimate]:
        """Every evaluator and group with data in the window ending at `now`.

        `now` defaults to the clock; offline, pass the time of the last span.
        """
        end = math.floor((self.clock() if now is None else now) / self.bucket_seconds)
        start = end - self._buckets
        with self._lock:
            summed: list[tuple[str, Group, Totals]] = []
            for (evaluator, group), buckets in self._windows.items():
                totals = Totals()
                for index, bucket in buckets.items():
                    if start < index <= end:
                        totals.merge(bucket)
                if totals.judged or totals.unjudged:
                    summed.append((evaluator, group, totals))
        return [
            Estimate(evaluator, self.labels(group), totals, interval(totals, self.confidence))
            for evaluator, group, totals in sorted(summed, key=lambda item: item[:2])
        ]


def estimate_all(
    observations: Iterable[Observation], group_by: Sequence[str] = (), confidence: float = 0.95
) -> list[Estimate]:
    """Estimates over every observation given, with no window and no group bound."""
    totals: dict[tuple[str, Group], Totals] = {}
    for observation in observations:
        key = (observation.evaluator, observation.group)
        totals.setdefault(key, Totals()).add(observation)
    estimates = []
    for (evaluator, group), sums in sorted(totals.items(), key=lambda item: item[0]):
        labels = dict(zip(group_by, group, strict=True))
        estimates.append(Estimate(evaluator, labels, sums, interval(sums, confidence)))
    return estimates


def _judged_status(result: EvaluatorResult) -> str:
    """The evaluator's status; an `ok` without a readable verdict counts as an error."""
    if result.status == semconv.STATUS_OK and result.hallucinated is None:
        return semconv.STATUS_ERROR
    return result.status


def _regrouped(observation: Observation, group: Group) -> Observation:
    return Observation(
        observation.evaluator,
        group,
        observation.weight,
        observation.status,
        observation.hallucinated,
        observation.time,
    )


def _check(
    group_by: Sequence[str],
    max_groups: int,
    window_seconds: float,
    bucket_seconds: float,
    confidence: float,
) -> None:
    reserved = {semconv.MONITOR_EVALUATOR, semconv.MONITOR_STATUS}
    if isinstance(group_by, str) or not all(isinstance(n, str) and n for n in group_by):
        raise TypeError(f"group_by must be a sequence of attribute names, not {group_by!r}")
    if len(set(group_by)) != len(group_by) or reserved & set(group_by):
        raise ValueError(f"group_by must be distinct names other than {sorted(reserved)}")
    if max_groups < 1:
        raise ValueError(f"max_groups must be at least 1, not {max_groups}")
    if not 0 < bucket_seconds <= window_seconds:
        raise ValueError(
            "window_seconds and bucket_seconds must be positive, bucket_seconds <= "
            f"window_seconds (got {window_seconds}, {bucket_seconds})"
        )
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
