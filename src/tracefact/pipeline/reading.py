"""The processor's use of the span conventions: what it notes as spans start and end.

On start (application thread), an LLM span inside a live LLM span is marked `nested`
(one model call is evaluated once: the outermost span) and an LLM span inside
`tracefact.grounding` gets its documents. On end, retriever spans of any convention
leave their documents in the per-trace store and a trace's local root clears it; an
LLM span is read into the case to judge, with the documents retrieved before it.
"""

from __future__ import annotations

import threading
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
from tracefact.instrument.grounding import grounding_attributes


class SpanReader:
    def __init__(self, options: ReadOptions | None = None, store: DocumentStore | None = None):
        self.options = options or ReadOptions()
        self.store = store if store is not None else DocumentStore()
        self._live: set[int] = set()  # span ids of LLM spans started and not yet ended
        self._lock = threading.Lock()  # guards _live across application threads

    def on_llm_start(self, span: Span, parent_context: Context | None) -> dict[str, Any]:
        """Attributes the starting LLM span gets: a `nested` skip, or grounding contexts."""
        parent = span.parent
        with self._lock:
            nested = parent is not None and not parent.is_remote and parent.span_id in self._live
            self._live.add(span.context.span_id)
        if nested:
            assert parent is not None
            return {
                semconv.EVAL_STATUS: semconv.STATUS_SKIPPED,
                semconv.EVAL_SKIP_REASON: semconv.SKIP_NESTED,
                semconv.EVAL_NESTED_IN: f"{parent.span_id:016x}",
            }
        if semconv.CONTEXTS in (span.attributes or {}):
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
            documents = retrieved_documents(span.attributes or {})
            if documents:
                self.store.add(context.trace_id, documents)
        if span.parent is None or span.parent.is_remote:
            self.store.forget(context.trace_id)

    def read(self, span: ReadableSpan) -> Reading:
        """The case to judge on an ended LLM span (call before `on_end`, which may
        forget the trace's documents)."""
        events = [(e.name, e.attributes or {}) for e in span.events]
        retrieved = self.store.documents(span.context.trace_id) if span.context else []
        return read_case(span.attributes or {}, events, retrieved=retrieved, options=self.options)
