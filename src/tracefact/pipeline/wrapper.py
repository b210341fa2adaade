"""A span processor that forwards everything to the processor it wraps."""

from __future__ import annotations

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor


class WrapperSpanProcessor(SpanProcessor):
    """Holds the downstream processor and forwards every call.

    Features subclass it and override only what they change.
    """

    def __init__(self, downstream: SpanProcessor) -> None:
        self.downstream = downstream

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.downstream.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        self.downstream.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.downstream.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self.downstream.shutdown()
