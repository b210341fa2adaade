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
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

from tracefact import semconv
from tracefact._version import __version__

logger = logging.getLogger("tracefact")

Attributes = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class SpanInfo:
    """What a sampler may look at: known at span start for live spans."""

    trace_id: int
    name: str
    attributes: Attributes


@dataclass(frozen=True, slots=True)
class Decision:
    sampled: bool
    rate: float
    """The probability that a span like this one is evaluated, for re-weighting."""


class Sampler:
    """Base class: subclasses implement `decide`; `record_cost` feeds spend back."""

    def decide(self, span: SpanInfo) -> Decision:
        raise NotImplementedError

    def record_cost(self, usd: float) -> None:
        """Called with each evaluation's cost; only budget-aware samplers use it."""

    def __and__(self, other: Sampler) -> Sampler:
        return AllOf(self, other)

    def __or__(self, other: Sampler) -> Sampler:
        return AnyOf(self, other)


class Always(Sampler):
    def decide(self, span: SpanInfo) -> Decision:
        return Decision(True, 1.0)

    def __repr__(self) -> str:
        return "Always()"


class Never(Sampler):
    def decide(self, span: SpanInfo) -> Decision:
        return Decision(False, 0.0)

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

    def decide(self, span: SpanInfo) -> Decision:
        return Decision(span.trace_id & TraceIdRatioBased.TRACE_ID_LIMIT < self._bound, self.rate)

    def __repr__(self) -> str:
        return f"Ratio({self.rate})"


class _PassRate:
    """Share of recent decisions that passed: a rate limiter's effective sampling rate."""

    def __init__(self, window_seconds: float = 60.0) -> None:
        self._window = window_seconds
        self._decisions: deque[tuple[float, bool]] = deque()
        self._passed = 0

    def add(self, now: float, passed: bool) -> float:
        self._decisions.append((now, passed))
        self._passed += passed
        while self._decisions and self._decisions[0][0] < now - self._window:
            self._passed -= self._decisions.popleft()[1]
        return self._passed / len(self._decisions)


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


class Budget(Sampler):
    """Stops sampling while the evaluation spend of the last hour would pass `usd_per_hour`.

    The next evaluation is assumed to cost what evaluations have cost on average.
    """

    def __init__(self, usd_per_hour: float, clock: Callable[[], float] = time.monotonic) -> None:
        if usd_per_hour < 0:
            raise ValueError(f"Budget usd_per_hour must not be negative, got {usd_per_hour}")
        self.usd_per_hour = usd_per_hour
        self._clock = clock
        self._spend: deque[tuple[float, float]] = deque()
        self._spent = 0.0
        self._evaluations = 0
        self._total_cost = 0.0
        self._pass_rate = _PassRate()
        self._lock = threading.Lock()  # decisions on app threads, costs from the worker

    def _expire(self, now: float) -> None:
        while self._spend and self._spend[0][0] <= now - 3600.0:
            self._spent -= self._spend.popleft()[1]

    def decide(self, span: SpanInfo) -> Decision:
        with self._lock:
            now = self._clock()
            self._expire(now)
            expected = self._total_cost / self._evaluations if self._evaluations else 0.0
            passed = self._spent + expected <= self.usd_per_hour
            return Decision(passed, self._pass_rate.add(now, passed))

    def record_cost(self, usd: float) -> None:
        with self._lock:
            now = self._clock()
            self._spend.append((now, usd))
            self._spent += usd
            self._evaluations += 1
            self._total_cost += usd
            self._expire(now)

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
        return self.then.decide(span)

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
        for part in self.parts:
            decision = part.decide(span)
            if not decision.sampled:
                return Decision(False, 0.0)
            rate *= decision.rate
        return Decision(True, rate)

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
        for part in self.parts:
            decision = part.decide(span)
            if decision.sampled:
                return Decision(True, 1.0 - missed * (1.0 - decision.rate))
            missed *= 1.0 - decision.rate
        return Decision(False, 0.0)

    def record_cost(self, usd: float) -> None:
        for part in self.parts:
            part.record_cost(usd)

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.parts))


NOT_SAMPLED = Decision(False, 0.0)


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
    _sampler_errors().add(1, {"sampler": type(sampler).__name__})
    logger.warning("tracefact: sampler %r failed, span not sampled: %r", sampler, error)
    return NOT_SAMPLED


def _sampler_errors() -> metrics.Counter:
    # Through the global meter provider, looked up per error (errors are rare), so a
    # provider set after import is used.
    meter = metrics.get_meter_provider().get_meter("tracefact", __version__)
    return meter.create_counter(
        semconv.SAMPLER_ERRORS_METRIC,
        unit="{decision}",
        description="sampler decisions that raised; the span counted as not sampled",
    )
