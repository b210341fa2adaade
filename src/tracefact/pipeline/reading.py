"""`SpanReader`: the pipeline's use of the conventions, and the documents a trace retrieved.

Hosts hand it what they see: a retriever span's documents (`remember`), a trace to
`forget` (each host knows when its trace is over), and an LLM span's record to `read`
into the case to judge, with the documents retrieved before it in its trace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracefact.conventions import DocumentStore, Reading, ReadOptions, read_case
from tracefact.conventions import retrieved_documents as documents_of
from tracefact.conventions.messages import Event
from tracefact.pipeline.verdict import SpanRecord


class SpanReader:
    """Reads LLM spans of any convention, with the user's options and a per-trace store."""

    def __init__(
        self, options: ReadOptions | None = None, store: DocumentStore | None = None
    ) -> None:
        self.options = options or ReadOptions()
        self.store = store if store is not None else DocumentStore()

    def remember(
        self, trace_id: int, attributes: Mapping[str, Any], events: Sequence[Event]
    ) -> None:
        """Keep a retriever span's documents (of any convention) for its trace's LLM spans."""
        documents = documents_of(attributes, events)
        if documents:
            self.store.add(trace_id, documents)

    def forget(self, trace_id: int) -> None:
        """The trace is over: its documents go."""
        self.store.forget(trace_id)

    def read(self, record: SpanRecord, grounding: Sequence[str] = ()) -> Reading:
        """The case to judge on an ended LLM span, or why there is none; never raises.

        grounding: documents of a `tracefact.grounding` block not yet on the span.
        """
        return read_case(
            record.attributes,
            record.events,
            retrieved=self.store.documents(record.trace_id),
            grounding=grounding,
            options=self.options,
        )
