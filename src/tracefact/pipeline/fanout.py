"""Result fan-out: every evaluation result also goes to the result sinks.

Sinks deliver on their own threads; a failing sink is logged and never holds up a
span or costs the pipeline its worker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from opentelemetry.sdk.trace import ReadableSpan

from tracefact.evaluators.base import EvalResult
from tracefact.sinks.base import EvaluatedSpan, ResultSink

logger = logging.getLogger("tracefact")


class FanOut:
    """Hands results to each sink; flushes and shuts them down with the pipeline."""

    def __init__(self, sinks: Sequence[ResultSink]) -> None:
        self.sinks = tuple(sinks)

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
