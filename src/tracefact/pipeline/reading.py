"""`SpanReader`: the pipeline's use of the conventions, and the evidence a trace gathered.

Hosts hand it what they see: a retriever span's documents and a tool span's result
(`remember`), a trace to `forget` (each host knows when its trace is over), and an LLM
span's record to `read` into the case to judge, with the documents retrieved and the
tool results returned before it in its trace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracefact.conventions import DocumentStore, Reading, ReadOptions, Role, read_case
from tracefact.conventions import retrieved_documents as documents_of
from tracefact.conventions.messages import Event
from tracefact.conventions.tools import document_entry, entry, split_entries, tool_span_result
from tracefact.pipeline.verdict import SpanRecord


class SpanReader:
    """Reads LLM spans of any convention, with the user's options and a per-trace store."""

    def __init__(
        self, options: ReadOptions | None = None, store: DocumentStore | None = None
    ) -> None:
        self.options = options or ReadOptions()
        self.store = store if store is not None else DocumentStore()

    def remember(
        self,
        trace_id: int,
        role: Role,
        attributes: Mapping[str, Any],
        events: Sequence[Event],
        ended: int | None = None,
    ) -> None:
        """Keep a retriever span's documents or a tool span's result for its trace's LLM spans.

        ended: when the span ended (unix nanoseconds): LLM spans that ended before it are
        not judged against its documents or result.
        """
        if role == "retriever":
            documents = documents_of(attributes, events)
            if documents:
                self.store.add(trace_id, [document_entry(text, ended) for text in documents])
        elif role == "tool":
            result = tool_span_result(attributes, events, ended)
            if result is not None:
                self.store.add(trace_id, [entry(result)])

    def forget(self, trace_id: int) -> None:
        """The trace is over: its evidence goes."""
        self.store.forget(trace_id)

    def evidence(self, trace_id: int) -> list[str]:
        """What the trace gathered so far (entries of the store), for a `read` later.

        Taken as the span ends: its trace's root may end, and its evidence go, before the
        evaluation thread reads the span.
        """
        return self.store.documents(trace_id)

    def read(
        self,
        record: SpanRecord,
        grounding: Sequence[str] = (),
        evidence: Sequence[str] | None = None,
    ) -> Reading:
        """The case to judge on an ended LLM span, or why there is none; never raises.

        grounding: documents of a `tracefact.grounding` block not yet on the span.
        evidence: the trace's entries as `evidence` took them (default: the store's now).
        """
        if evidence is None:
            evidence = self.store.documents(record.trace_id)
        documents, tools = split_entries(evidence, record.end_time)
        return read_case(
            record.attributes,
            record.events,
            retrieved=documents,
            tools=tools,
            grounding=grounding,
            ended=record.end_time,
            options=self.options,
        )
