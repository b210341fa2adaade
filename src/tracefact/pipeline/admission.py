"""Admission: the one place a span is admitted to evaluation, refused, or released.

The sampler decides first (refused: `sampled_out`); a sampled span then needs room
among the spans in flight, at most `capacity` (`PipelineOptions.queue_size`) of them
(refused: `full`, its status `dropped`). An admitted span holds its place, and the
sampler its decision (a budget's reservation), until it is released, exactly once, with
what it cost. Nothing else counts spans in flight, and no case is read before this.

`bounded` (the collector's): the sampler is ``sampler & Capacity(self.room)``, so a span
beyond the room is sampled out by the sampler, its pass share recorded in the rate of
the spans it lets through, rather than sampled and then `dropped`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from tracefact import semconv
from tracefact.pipeline.verdict import SAMPLED_OUT, Verdict, refused
from tracefact.sampling import Capacity, Decision, Sampler, SpanInfo, safe_decide, safe_settle


class Admission:
    """The sampler and the bound on spans in flight, behind one lock."""

    def __init__(self, capacity: int, sampler: Sampler, *, bounded: bool = False) -> None:
        self.capacity = capacity
        self.sampler = sampler & Capacity(self.room) if bounded else sampler
        self._lock = threading.Lock()  # guards _in_flight; never held while calling out
        self._in_flight = 0

    @property
    def in_flight(self) -> int:
        """Spans admitted and not yet released (the `tracefact.eval.queue.depth` gauge)."""
        return self._in_flight

    def room(self) -> int:
        """How many more spans would be admitted now, sampler permitting."""
        return self.capacity - self._in_flight

    def admit(self, trace_id: int, name: str, attributes: Mapping[str, Any]) -> Decision | Verdict:
        """Sample the span, then give it a place in flight; never raises.

        Admitted: the sampler's decision, which holds the place until `release`.
        Refused: the verdict that says why.
        """
        decision = safe_decide(self.sampler, SpanInfo(trace_id, name, attributes))
        if not decision.sampled:
            return SAMPLED_OUT  # `refused`'s answer for every span sampled out
        with self._lock:
            admitted = self._in_flight < self.capacity
            if admitted:
                self._in_flight += 1
        if admitted:
            return decision
        safe_settle(self.sampler, decision, None)  # a budget gets its reservation back
        return refused(semconv.REFUSED_FULL, decision.rate)

    def release(self, admitted: Decision, cost_usd: float | None = None) -> None:
        """Give an admitted span's place back, and its decision to the sampler with its cost."""
        with self._lock:
            self._in_flight -= 1
        safe_settle(self.sampler, admitted, cost_usd)
