"""Admission: the one place a span is admitted to evaluation, refused, or released.

The sampler decides first (refused: `sampled_out`); a sampled span then needs room
among the spans in flight, at most `capacity` (`PipelineOptions.queue_size`) of them
(refused: `full`, its status `dropped`). An admitted span holds its place, and the
sampler its decision (a budget's reservation), until it is released, exactly once, with
what it cost. Nothing else counts spans in flight, and no case is read before this.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, NamedTuple

from tracefact import semconv
from tracefact.pipeline.verdict import Verdict, refused
from tracefact.sampling import Decision, Sampler, SpanInfo, safe_decide


class Ticket(NamedTuple):
    """Admission's answer for one span: its place in flight, or the refusal's verdict."""

    decision: Decision
    refusal: Verdict | None = None

    @property
    def rate(self) -> float:
        """The span's effective sampling rate."""
        return self.decision.rate


class Admission:
    """The sampler and the bound on spans in flight, behind one lock."""

    def __init__(self, capacity: int, sampler: Sampler) -> None:
        self.capacity = capacity
        self.sampler = sampler
        self._lock = threading.Lock()  # guards _in_flight; never held while calling out
        self._in_flight = 0

    @property
    def in_flight(self) -> int:
        """Spans admitted and not yet released (the `tracefact.eval.queue.depth` gauge)."""
        return self._in_flight

    def room(self) -> int:
        """How many more spans would be admitted now, sampler permitting."""
        return self.capacity - self._in_flight

    def admit(self, trace_id: int, name: str, attributes: Mapping[str, Any]) -> Ticket:
        """Sample the span, then give it a place in flight; never raises."""
        decision = safe_decide(self.sampler, SpanInfo(trace_id, name, attributes))
        if not decision.sampled:
            return Ticket(decision, refused(semconv.REFUSED_SAMPLED_OUT, decision.rate))
        with self._lock:
            admitted = self._in_flight < self.capacity
            if admitted:
                self._in_flight += 1
        if admitted:
            return Ticket(decision)
        self.sampler.settle(decision, None)  # a budget gets its reservation back
        return Ticket(decision, refused(semconv.REFUSED_FULL, decision.rate))

    def release(self, ticket: Ticket, cost_usd: float | None = None) -> None:
        """Give an admitted span's place back, and its decision to the sampler with its cost."""
        with self._lock:
            self._in_flight -= 1
        self.sampler.settle(ticket.decision, cost_usd)
