"""Which LLM spans get evaluated.

A sampler looks at a span's trace id, name and attributes and answers with a
`Decision`: evaluate or not, and the effective sampling rate, which goes on the span
as `tracefact.eval.sample_rate` so that rates can be re-weighted later.

Samplers compose: ``Ratio(0.2) & RateLimit(per_second=10)`` evaluates a fifth of the
traces but never more than ten spans a second; ``|`` takes either. ``&`` asks its
right side only when the left says yes, so a rate limiter spends tokens only on
spans that would otherwise be evaluated.
"""

from __future__ import annotations

import fnmatch
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import metrics
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

from tracefact import semconv
from tracefact._otel import reset_after_fork
from tracefact._version import __version__

logger = logging.getLogger("tracefact")

Attributes = Mapping[str, Any]


@dataclass(slots=True)
class SpanInfo:
    """What a sampler may look at: known at span start for live spans.

    Read-only by convention; not frozen, since a frozen dataclass costs an application
    thread three times as much to build, once per LLM span.
    """

    trace_id: int
    name: str
    attributes: Attributes


@dataclass(frozen=True, slots=True)
class Decision:
    sampled: bool
    rate: float
    """The probability that a span like this one is evaluated, for re-weighting."""
    reservation: object = field(default=None, compare=False)
    """What the sampler set aside for this evaluation, handed back to `Sampler.settle`."""


SAMPLED = Decision(True, 1.0)
NOT_SAMPLED = Decision(False, 0.0)


class Sampler:
    """Base class: subclasses implement `decide`; `settle` feeds spend back.

    Every sampled decision is settled exactly once, when its evaluation ends.
    """

    def decide(self, span: SpanInfo) -> Decision:
        raise NotImplementedError

    def settle(self, decision: Decision, usd: float | None) -> None:
        """A sampled span's evaluation ended; release what `decide` reserved.

        `usd` is what it cost, None if it ended without a known cost (dropped, failed,
        shut down).
        """
        if usd:
            self.record_cost(usd)

    def record_cost(self, usd: float) -> None:
        """Spend not tied to a decision; only budget-aware samplers use it."""

    def __and__(self, other: Sampler) -> Sampler:
        return AllOf(self, other)

    def __or__(self, other: Sampler) -> Sampler:
        return AnyOf(self, other)


class Always(Sampler):
    def decide(self, span: SpanInfo) -> Decision:
        return SAMPLED

    def __repr__(self) -> str:
        return "Always()"


class Never(Sampler):
    def decide(self, span: SpanInfo) -> Decision:
        return NOT_SAMPLED

    def __repr__(self) -> str:
        return "Never()"


class Ratio(Sampler):
    """A fixed share of traces, decided on the trace id.

    Decided exactly as OpenTelemetry's `TraceIdRatioBased` does, so that tracefact and
    the tracer's own sampler agree on a trace.
    """

    def __init__(self, rate: float) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"Ratio rate must be within [0, 1], got {rate}")
        self.rate = rate
        self._bound = TraceIdRatioBased.get_bound_for_rate(rate)
        self._decisions = (Decision(False, rate), Decision(True, rate))  # built once

    def decide(self, span: SpanInfo) -> Decision:
        return self._decisions[span.trace_id & TraceIdRatioBased.TRACE_ID_LIMIT < self._bound]

    def __repr__(self) -> str:
        return f"Ratio({self.rate})"


class _PassRate:
    """Share of recent decisions that passed: a rate limiter's effective sampling rate.

    Counted per one-second bucket, so memory stays the same at any decision rate.
    """

    def __init__(self, window_seconds: float = 60.0, bucket_seconds: float = 1.0) -> None:
        self._window = window_seconds
        self._buckets = _Buckets(bucket_seconds)

    def add(self, now: float, passed: bool) -> float:
        self._buckets.add(now, (float(passed), 1.0))
        passed_total, total = self._buckets.totals(now - self._window)
        return passed_total / total


class _Buckets:
    """Sums of a few numbers per time bucket; buckets older than a cutoff are forgotten.

    The totals over the kept buckets are kept as they change, so asking costs the same
    however many buckets there are (a sampler asks once per decision).
    """

    def __init__(self, bucket_seconds: float) -> None:
        self._seconds = bucket_seconds
        self._buckets: deque[list[float]] = deque()  # [bucket start, *sums]
        self._totals: list[float] = []

    def add(self, now: float, values: tuple[float, ...]) -> None:
        start = now - now % self._seconds
        if not self._buckets or self._buckets[-1][0] < start:
            self._buckets.append([start, *(0.0 for _ in values)])
            if not self._totals:
                self._totals = [0.0 for _ in values]
        bucket = self._buckets[-1]
        for i, value in enumerate(values):
            bucket[i + 1] += value
            self._totals[i] += value

    def totals(self, since: float) -> tuple[float, ...]:
        """Sums over the buckets that end after `since` (a bucket leaves whole)."""
        while self._buckets and self._buckets[0][0] + self._seconds <= since:
            gone = self._buckets.popleft()
            for i, value in enumerate(gone[1:]):
                self._totals[i] -= value
        if not self._buckets:
            self._totals = []  # no drift carried past an empty window
            return ()
        return tuple(self._totals)


class RateLimit(Sampler):
    """At most `per_second` evaluations a second on average, `burst` at once (token bucket)."""

    def __init__(
        self,
        per_second: float,
        burst: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_second <= 0:
            raise ValueError(f"RateLimit per_second must be positive, got {per_second}")
        self.per_second = per_second
        self.burst = burst if burst is not None else max(1.0, per_second)
        self._clock = clock
        self._tokens = self.burst
        self._last = clock()
        self._pass_rate = _PassRate()
        self._lock = threading.Lock()  # spans end on many application threads

    def decide(self, span: SpanInfo) -> Decision:
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.per_second)
            self._last = now
            passed = self._tokens >= 1.0
            if passed:
                self._tokens -= 1.0
            return Decision(passed, self._pass_rate.add(now, passed))

    def __repr__(self) -> str:
        return f"RateLimit(per_second={self.per_second}, burst={self.burst})"


class Capacity(Sampler):
    """Passes while evaluation has room (`room()` above zero); its pass share is its rate.

    Bounds a sampler by what the evaluator can take: ``configured & Capacity(room)``
    samples the excess out at once, with the rate actually applied on each evaluated
    span, rather than reading spans that are then refused as `dropped` (which leaves the
    monitored rate to depend on drops). The share is counted as `RateLimit` counts its own.
    """

    def __init__(
        self, room: Callable[[], int], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.room = room
        self._clock = clock
        self._pass_rate = _PassRate()
        self._lock = threading.Lock()

    def decide(self, span: SpanInfo) -> Decision:
        passed = self.room() > 0
        with self._lock:
            return Decision(passed, self._pass_rate.add(self._clock(), passed))

    def __repr__(self) -> str:
        return "Capacity()"


class Budget(Sampler):
    """Stops sampling while the evaluation spend of the last hour would pass `usd_per_hour`.

    Each admitted span reserves the expected cost of its evaluation until `settle` brings
    the real one, so evaluations in flight count against the budget. The expected cost
    is the average of the costs seen so far; before any is known it is
    `expected_cost_usd`, and without that one evaluation at a time is admitted.
    Spend is kept per minute, so it leaves the window up to a minute late.
    """

    def __init__(
        self,
        usd_per_hour: float,
        expected_cost_usd: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if usd_per_hour < 0:
            raise ValueError(f"Budget usd_per_hour must not be negative, got {usd_per_hour}")
        if expected_cost_usd is not None and expected_cost_usd < 0:
            raise ValueError(f"Budget expected_cost_usd must not be negative: {expected_cost_usd}")
        self.usd_per_hour = usd_per_hour
        self.expected_cost_usd = expected_cost_usd
        self._clock = clock
        self._spend = _Buckets(60.0)
        self._evaluations = 0
        self._total_cost = 0.0
        self._pass_rate = _PassRate()
        self._forget_in_flight()
        reset_after_fork(self._forget_in_flight)

    def _forget_in_flight(self) -> None:
        """No evaluation in flight; also run in a forked child, whose parent owns them."""
        self._in_flight = 0
        self._reserved = 0.0
        self._lock = threading.Lock()  # decisions on app threads, costs from the worker

    def _expected(self) -> float | None:
        if self._evaluations:
            return self._total_cost / self._evaluations
        return self.expected_cost_usd

    def decide(self, span: SpanInfo) -> Decision:
        with self._lock:
            now = self._clock()
            (spent,) = self._spend.totals(now - 3600.0) or (0.0,)
            expected = self._expected()
            if expected is None:  # nothing to go by: one evaluation at a time
                passed = self._in_flight == 0 and spent <= self.usd_per_hour
                expected = 0.0
            else:
                passed = spent + self._reserved + expected <= self.usd_per_hour
            if passed:
                self._in_flight += 1
                self._reserved += expected
            rate = self._pass_rate.add(now, passed)
            return Decision(passed, rate, expected if passed else None)

    def settle(self, decision: Decision, usd: float | None) -> None:
        if isinstance(decision.reservation, float):
            with self._lock:
                self._in_flight -= 1
                self._reserved = max(0.0, self._reserved - decision.reservation)
        if usd is not None:
            self.record_cost(usd)

    def record_cost(self, usd: float) -> None:
        with self._lock:
            self._spend.add(self._clock(), (usd,))
            self._evaluations += 1
            self._total_cost += usd

    def __repr__(self) -> str:
        return f"Budget(usd_per_hour={self.usd_per_hour})"


Match = str | Mapping[str, Any] | Callable[[SpanInfo], bool]


class Rule(Sampler):
    """Spans that `match` are decided by `then`; all others are not sampled.

    `match` is a span-name pattern (``"checkout.*"``), a mapping of attribute values
    that must all be equal, or a predicate on `SpanInfo`. Combine rules with ``|``:
    ``Rule("vip.*", then=Always()) | Ratio(0.05)``.
    """

    def __init__(self, match: Match, then: Sampler) -> None:
        self.match = match
        self.then = then

    def matches(self, span: SpanInfo) -> bool:
        if isinstance(self.match, str):
            return fnmatch.fnmatchcase(span.name, self.match)
        if isinstance(self.match, Mapping):
            return all(span.attributes.get(k) == v for k, v in self.match.items())
        return bool(self.match(span))

    def decide(self, span: SpanInfo) -> Decision:
        if not self.matches(span):
            return Decision(False, 0.0)
        decision = self.then.decide(span)
        return Decision(decision.sampled, decision.rate, decision)

    def settle(self, decision: Decision, usd: float | None) -> None:
        if isinstance(decision.reservation, Decision):
            self.then.settle(decision.reservation, usd)

    def record_cost(self, usd: float) -> None:
        self.then.record_cost(usd)

    def __repr__(self) -> str:
        return f"Rule({self.match!r}, then={self.then!r})"


class AllOf(Sampler):
    """Sampled when every part says yes; asks each part only while all so far said yes."""

    def __init__(self, *parts: Sampler) -> None:
        self.parts = parts

    def decide(self, span: SpanInfo) -> Decision:
        rate = 1.0
        admitted: list[Decision] = []
        for part in self.parts:
            decision = part.decide(span)
            if not decision.sampled:
                for earlier, yes in zip(self.parts, admitted, strict=False):
                    earlier.settle(yes, None)  # what the earlier parts reserved goes back
                return Decision(False, 0.0)
            admitted.append(decision)
            rate *= decision.rate
        return Decision(True, rate, tuple(admitted))

    def settle(self, decision: Decision, usd: float | None) -> None:
        if isinstance(decision.reservation, tuple):
            for part, admitted in zip(self.parts, decision.reservation, strict=False):
                part.settle(admitted, usd)

    def record_cost(self, usd: float) -> None:
        for part in self.parts:
            part.record_cost(usd)

    def __repr__(self) -> str:
        return " & ".join(map(repr, self.parts))


class AnyOf(Sampler):
    """Sampled when any part says yes; stops asking at the first yes."""

    def __init__(self, *parts: Sampler) -> None:
        self.parts = parts

    def decide(self, span: SpanInfo) -> Decision:
        missed = 1.0
        for index, part in enumerate(self.parts):
            decision = part.decide(span)
            if decision.sampled:
                return Decision(True, 1.0 - missed * (1.0 - decision.rate), (index, decision))
            missed *= 1.0 - decision.rate
        return Decision(False, 0.0)

    def settle(self, decision: Decision, usd: float | None) -> None:
        if isinstance(decision.reservation, tuple):
            index, admitted = decision.reservation
            self.parts[index].settle(admitted, usd)

    def record_cost(self, usd: float) -> None:
        for part in self.parts:
            part.record_cost(usd)

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.parts))


def safe_decide(sampler: Sampler, span: SpanInfo) -> Decision:
    """The sampler's decision, or "not sampled" when it raises or answers nonsense.

    A user's predicate runs on the application's thread inside span start and end: its
    bug must cost one evaluation (counted in `tracefact.sampler.errors`, logged), never
    an exception in the application or a lost span.
    """
    try:
        decision = sampler.decide(span)
        if isinstance(decision, Decision):
            return decision
        error: BaseException = TypeError(f"decide() returned {type(decision).__name__}")
    except Exception as exc:
        error = exc
    _failed(sampler, "span not sampled", error)
    return NOT_SAMPLED


def safe_settle(sampler: Sampler, decision: Decision, usd: float | None) -> None:
    """Hand a decision back to the sampler; its failure is counted and logged, never raised.

    It runs where `decide` does (and on the evaluation loop): the same promise holds.
    """
    try:
        sampler.settle(decision, usd)
    except Exception as exc:
        _failed(sampler, "a decision not settled", exc)


def _failed(sampler: Sampler, consequence: str, error: BaseException) -> None:
    """A sampler's failure, counted in `tracefact.sampler.errors` and logged."""
    _sampler_errors().add(1, {"sampler": type(sampler).__name__})
    logger.warning("tracefact: sampler %r failed, %s: %r", sampler, consequence, error)


def _sampler_errors() -> metrics.Counter:
    # Through the global meter provider, looked up per error (errors are rare), so a
    # provider set after import is used.
    meter = metrics.get_meter_provider().get_meter("tracefact", __version__)
    return meter.create_counter(
        semconv.METRIC_SAMPLER_ERRORS,
        unit="{decision}",
        description="sampler decisions that raised; the span counted as not sampled",
    )
