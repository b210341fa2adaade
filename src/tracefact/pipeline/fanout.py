"""Result fan-out: results to the result sinks, final outcomes to the span observers.

Every evaluation result goes to the sinks, every sampled span's final outcome to the
observers (the live rate monitor). Sinks deliver on their own threads; a failing
sink or observer is logged and never holds up a span or costs the pipeline its worker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from opentelemetry.sdk.trace import ReadableSpan

from tracefact.evaluators.base import EvalResult
from tracefact.sinks.base import EvaluatedSpan, ResultSink

logger = logging.getLogger("tracefact")


@runtime_checkable
class SpanObserver(Protocol):
    """Sees each sampled LLM span once, as it leaves the pipeline with its final status.

    The span carries its `tracefact.eval.status`, `tracefact.eval.sample_rate` and, once
    judged, every evaluator's status and verdict; when the results travel on a carrier
    span, the observer still gets the evaluated span with them. Called on application
    threads and the evaluation loop: it must be quick, and never raise.
    """

    def observe(self, span: ReadableSpan) -> None: ...


class FanOut:
    """Hands results to each sink and spans to each observer.

    Flushes and shuts the sinks down with the pipeline.
    """

    def __init__(self, sinks: Sequence[ResultSink], observers: Sequence[SpanObserver] = ()) -> None:
        self.sinks = tuple(sinks)
        self.observers = tuple(observers)

    def observe(self, span: ReadableSpan) -> None:
        """Show a sampled span's final outcome to every observer."""
        for observer in self.observers:
            try:
                observer.observe(span)
            except Exception:  # a monitor's bug must not cost the span its export
                logger.exception("tracefact: span observer %r failed", observer)

    def publish(self, span: ReadableSpan, results: Sequence[EvalResult]) -> None:
        """Submit each result of `span` to every sink."""
        assert span.context is not None, "only spans with a context are evaluated"
        for result in results:
            evaluated = EvaluatedSpan(span.context, span.name, result)
            for sink in self.sinks:
                try:
                    sink.submit(evaluated)
                except Exception:  # a sink's bug must not cost the pipeline its worker
                    logger.exception("tracefact: result sink %s failed", sink.name)

    def force_flush(self, remaining_millis: Callable[[], int]) -> bool:
        """Flush every sink within what is left of the caller's deadline."""
        flushed = True
        for sink in self.sinks:
            flushed = sink.force_flush(remaining_millis()) and flushed
        return flushed

    def shutdown(self) -> None:
        """Shut every sink down; one failing does not keep the others running."""
        for sink in self.sinks:
            try:
                sink.shutdown()
            except Exception:
                logger.exception("tracefact: result sink %s failed to shut down", sink.name)
