"""Instrumentation: decorators, context managers and litellm wrapping.

Knows only `tracefact.semconv`: it works with any span processor and knows nothing
of evaluation.
"""

from tracefact.instrument.capture import CaptureOptions, set_capture_options
from tracefact.instrument.decorators import chain, llm, retriever, tool
from tracefact.instrument.spans import SpanRecorder, span

__all__ = [
    "CaptureOptions",
    "SpanRecorder",
    "chain",
    "llm",
    "retriever",
    "set_capture_options",
    "span",
    "tool",
]
