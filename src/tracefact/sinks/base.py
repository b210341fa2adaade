"""The result-sink contract: where evaluation results go besides the span's own attributes.

Some backends keep evaluations apart from span attributes (Phoenix's span annotations,
MLflow's assessments). A sink receives every finished result with the identity of the
span it judges, and delivers it on its own thread: the pipeline hands it over and moves
on, whatever the backend does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from opentelemetry.trace import SpanContext, format_span_id, format_trace_id

from tracefact.evaluators.base import EvalResult


@dataclass(frozen=True, slots=True)
class EvaluatedSpan:
    """One evaluator's result on one span."""

    context: SpanContext
    span_name: str
    result: EvalResult
    settled: Callable[[bool], None] | None = field(default=None, compare=False, repr=False)
    """The host's hold on the span until its result is accounted for: a sink calls it once
    when the result is delivered, failed or dropped (False), or cut off by shutdown (True).
    The collector acknowledges a durable queue's entry only then, so a restart
    evaluates and sends again what no sink accounted for."""

    def settle(self, cut: bool = False) -> None:
        """Tell the host this sink is done with the result (see `settled`)."""
        if self.settled is not None:
            self.settled(cut)

    @property
    def trace_id(self) -> str:
        """32 lowercase hex digits, as OTLP/JSON and every backend's API spell it."""
        return format_trace_id(self.context.trace_id)

    @property
    def span_id(self) -> str:
        """16 lowercase hex digits."""
        return format_span_id(self.context.span_id)


@runtime_checkable
class ResultSink(Protocol):
    """Receives results from the pipeline's worker thread.

    Follows a span processor's lifecycle (`force_flush`, `shutdown`). A sink that counts
    in OpenTelemetry metrics may also define `use_meter_provider(provider)`: the pipeline
    hands it the meter provider it was given (`configure`'s, with `prometheus_port`).
    """

    name: str

    def submit(self, evaluated: EvaluatedSpan) -> None:
        """Take one result for delivery. Never blocks on the network and never raises.

        Once the result is delivered, failed or dropped, the sink calls
        `evaluated.settle()` (`settle(cut=True)` when shutdown cut it off), exactly once.
        """
        ...

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Deliver what is queued; False if something was still undelivered at the timeout."""
        ...

    def shutdown(self) -> None:
        """Deliver what is queued (within the sink's own drain time), then stop."""
        ...
