"""tracefact: see on your own traces whether LLM answers are grounded in their contexts.

The public API is small and flat; everything else lives in modules with one job.
"""

from tracefact._configure import configure, force_flush, shutdown
from tracefact._version import __version__
from tracefact.instrument.decorators import chain, llm, retriever, tool
from tracefact.instrument.grounding import grounding
from tracefact.instrument.litellm import instrument_litellm, uninstrument_litellm
from tracefact.instrument.spans import SpanRecorder, span

__all__ = [
    "SpanRecorder",
    "__version__",
    "chain",
    "configure",
    "force_flush",
    "grounding",
    "instrument_litellm",
    "llm",
    "retriever",
    "shutdown",
    "span",
    "tool",
    "uninstrument_litellm",
]
