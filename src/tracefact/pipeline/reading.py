"""The processor's use of the span conventions: what it notes as spans start and end.

On start (application thread), an LLM span inside a live LLM span is marked `nested`
(one model call is evaluated once: the outermost span) and an LLM span inside
`tracefact.grounding` gets its documents. On end, retriever spans of any convention
leave their documents in the per-trace store and a trace's local root clears it; an
LLM span is read into the case to judge, with the documents retrieved before it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span

from tracefact import semconv
from tracefact.conventions import (
    DocumentStore,
    Reading,
    ReadOptions,
    Role,
    read_case,
    retrieved_documents,
)
from tracefact.instrument.grounding import grounding_attributes, grounding_documents


def plain_attributes(span: ReadableSpan) -> Mapping[str, Any]:
    """The plain dict behind the SDK's attributes, for the hot path.

    A missing key in the public mapping costs a raised and caught KeyError per lookup, here it costs
    nothing. Falls back to the public mapping should the SDK's internals change. Read-only.
    """
    try:
        plain: dict[str, Any] = span._attributes._dict  # type: ignore[union-attr]
    except AttributeError:
        return span.attributes or {}
    return plain


class SpanReader:
    def __init__(self, options: ReadOptions | None = None, store: DocumentStore | None = None):
        self.options = options or ReadOptions()
        self.store = store if store is not None else DocumentStore()
        self._live: set[int] = set()  # span ids of LLM spans started and not yet ended
        self._lock = threading.Lock()  # guards _live across application threads

    def on_llm_start(self, span: Span, parent_context: Context | None) -> dict[str, Any]:
        """Attributes the starting LLM span gets: a `nested` skip, or grounding contexts."""
        nested_in = self._nested_in(span)
        with self._lock:
            self._live.add(span.context.span_id)
        if nested_in is not None:
            skip = Reading(None, skip_reason=semconv.SKIP_NESTED, nested_in=nested_in)
            return {semconv.EVAL_STATUS: semconv.STATUS_SKIPPED, **skip.skip_attributes()}
        if semconv.CONTEXTS in plain_attributes(span):
            return {}
        return grounding_attributes(parent_context)

    def on_end(self, span: ReadableSpan, role: Role | None) -> None:
        """Remember a retriever's documents; forget the trace when its local root ends."""
        context = span.context
        if context is None:
            return
        if role == "llm":
            with self._lock:
                self._live.discard(context.span_id)
        elif role == "retriever":
            events = [(e.name, e.attributes or {}) for e in span.events]
            documents = retrieved_documents(span.attributes or {}, events)
            if documents:
                self.store.add(context.trace_id, documents)
        if span.parent is None or span.parent.is_remote:
            self.store.forget(context.trace_id)

    def read(self, span: ReadableSpan) -> Reading:
        """The case to judge on an ended LLM span.

        Call it before `on_end`, which may forget the trace's documents. A span recognised
        only now (instrumentors that set their attributes at the end: OpenInference's
        LangChain tracer) is checked for nesting and grounding here, in the context that
        ends it.
        """
        assert span.context is not None
        grounding: tuple[str, ...] = ()
        if span.context.span_id not in self._live:
            nested_in = self._nested_in(span)
            if nested_in is not None:
                return Reading(None, skip_reason=semconv.SKIP_NESTED, nested_in=nested_in)
            grounding = grounding_documents()
        events = [(e.name, e.attributes or {}) for e in span.events]
        retrieved = self.store.documents(span.context.trace_id)
        return read_case(
            span.attributes or {},
            events,
            retrieved=retrieved,
            grounding=grounding,
            options=self.options,
        )

    def _nested_in(self, span: ReadableSpan) -> str | None:
        parent = span.parent
        if parent is None or parent.is_remote or parent.span_id not in self._live:
            return None
        return f"{parent.span_id:016x}"
