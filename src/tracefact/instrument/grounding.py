"""`tracefact.grounding(documents)`: the contexts of every LLM span started inside it.

For apps whose model calls another library instruments (OpenInference, the GenAI
instrumentors, OpenLLMetry): tracefact's processor writes these documents on each LLM
span as it starts, whoever made the span. The documents ride in the OpenTelemetry
context, so they follow threads and tasks exactly as the current span does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context

from tracefact import semconv
from tracefact.instrument.capture import capture_options, finish
from tracefact.instrument.documents import to_documents

_KEY = otel_context.create_key("tracefact.grounding")
_opened = False
"""Whether any `grounding` block was opened in this process: until one is, an LLM span
as it starts costs no look-up of the context."""


@contextmanager
def grounding(documents: Any) -> Iterator[None]:
    """Evaluate the LLM spans started in this block against `documents`.

    Strings, dicts or objects with content/text/page_content, as a retriever returns them:
    ``with tracefact.grounding(docs): client.chat.completions.create(...)``
    """
    global _opened
    texts = tuple(doc.content for doc in to_documents(documents) if doc.content.strip())
    _opened = True
    token = otel_context.attach(otel_context.set_value(_KEY, texts))
    try:
        yield
    finally:
        otel_context.detach(token)


def grounding_documents(parent_context: otel_context.Context | None = None) -> tuple[str, ...]:
    """The documents of the enclosing `grounding` block, or ()."""
    if not _opened:
        return ()
    # Instrumentors that start spans from an explicit parent context (LangChain's
    # callbacks) pass one without our key: the current context still holds it.
    texts = otel_context.get_value(_KEY, parent_context) or otel_context.get_value(_KEY)
    return texts if isinstance(texts, tuple) else ()


def grounding_attributes(parent_context: otel_context.Context | None) -> dict[str, Any]:
    """The attributes a span started in `parent_context` gets from a `grounding` block.

    None outside one; with content capture off, only the count.
    """
    texts = grounding_documents(parent_context)
    if not texts:
        return {}
    options = capture_options()
    if not options.capture_content:
        return {semconv.CONTEXTS_COUNT: len(texts)}
    scrubbed: list[str] = []
    attributes: dict[str, Any] = {
        semconv.CONTEXTS: [
            finish(text, options, f"{semconv.CONTEXTS}.{i}", scrubbed)
            for i, text in enumerate(texts)
        ],
        semconv.CONTEXTS_SOURCE: semconv.CONTEXT_SOURCE_GROUNDING,
    }
    if scrubbed:
        attributes[semconv.SCRUBBED] = scrubbed
    return attributes
