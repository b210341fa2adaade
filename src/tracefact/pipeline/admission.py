"""Admission: which LLM spans are evaluated, decided on the application's thread.

The sampler decides; a sampled span then needs a free slot, or it is exported
unevaluated with status `dropped`. Each decision costs at most one attribute write.
"""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.sdk.trace import ReadableSpan, Span

from tracefact import semconv
from tracefact.pipeline.slots import Slots
from tracefact.sampling import Decision, Sampler, SpanInfo, safe_decide


@dataclass(frozen=True, slots=True)
class Admitted:
    """The decision at a span's end: evaluate it, or export it with `status`."""

    decision: Decision
    status: semconv.EvalStatus | None = None

    @property
    def rate(self) -> float:
        """The span's effective sampling rate."""
        return self.decision.rate


class Admission:
    """Sampling decision and slot reservation."""

    def __init__(self, sampler: Sampler, slots: Slots) -> None:
        self.sampler = sampler
        self.slots = slots

    def at_start(self, span: Span) -> None:
        """Decide as the span opens, so a refusal costs no copy at its end."""
        decision = safe_decide(
            self.sampler, SpanInfo(span.context.trace_id, span.name, span.attributes or {})
        )
        # One attribute write per span: each costs the SDK a locked validation pass.
        if not decision.sampled:
            span.set_attribute(semconv.EVAL_STATUS, semconv.STATUS_SAMPLED_OUT)
        elif not self.slots.reserve(span.context.span_id, decision):  # the rate weighs it
            dropped = {semconv.EVAL_STATUS: semconv.STATUS_DROPPED}
            span.set_attributes({**dropped, semconv.EVAL_SAMPLE_RATE: decision.rate})
        else:
            span.set_attribute(semconv.EVAL_SAMPLE_RATE, decision.rate)

    def release(self, span: ReadableSpan) -> None:
        """Free the slot reserved at start for a span that ends without evaluation.

        A span read as nested only at its end, or given a status while it was open,
        still holds the slot (and any budget reservation) it took at start.
        """
        assert span.context is not None, "an ended SDK span always has a context"
        reserved = self.slots.take(span.context.span_id)
        if reserved is not None:
            self.slots.free(reserved)

    def at_end(self, span: ReadableSpan) -> Admitted:
        """The slot reserved at start, or a decision now for a span first seen ending."""
        assert span.context is not None, "an ended SDK span always has a context"
        reserved = self.slots.take(span.context.span_id)
        if reserved is not None:
            return Admitted(reserved)
        decision = safe_decide(
            self.sampler, SpanInfo(span.context.trace_id, span.name, span.attributes or {})
        )
        if not decision.sampled:
            return Admitted(decision, semconv.STATUS_SAMPLED_OUT)
        if not self.slots.reserve(None, decision):
            return Admitted(decision, semconv.STATUS_DROPPED)
        return Admitted(decision)
