"""Retrieved documents: normalising what retrievers return, and remembering it per trace.

An LLM span given no explicit contexts is evaluated against the documents that
retriever spans of the same trace returned before it. The memory is keyed by trace
id, so concurrent requests (threads or asyncio tasks, each its own trace) never see
each other's documents.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tracefact.instrument.capture import to_text

_CONTENT_KEYS = ("content", "text", "page_content")
_ID_KEYS = ("id", "doc_id", "document_id")
_SCORE_KEYS = ("score", "relevance_score", "similarity")


@dataclass(frozen=True, slots=True)
class Document:
    content: str
    id: str | None = None
    score: float | None = None


def to_documents(result: Any) -> list[Document]:
    """Whatever a retriever returned, as a list of documents (never raises)."""
    if result is None:
        return []
    if isinstance(result, (str, bytes, Mapping)) or not isinstance(result, Iterable):
        return [to_document(result)]
    return [to_document(item) for item in result]


def to_document(item: Any) -> Document:
    """A string, a dict or an object with content/text/page_content (+ id, score).

    A ``(document, score)`` pair, as vector stores often return, is understood too.
    """
    if isinstance(item, str):
        return Document(item)
    if (
        isinstance(item, tuple)
        and len(item) == 2
        and isinstance(item[1], (int, float))
        and not isinstance(item[1], bool)
    ):
        doc = to_document(item[0])
        return Document(doc.content, doc.id, float(item[1]))
    get = item.get if isinstance(item, Mapping) else lambda key: getattr(item, key, None)
    content = _first(get, _CONTENT_KEYS)
    if content is None:
        return Document(to_text(item)[0])
    doc_id = _first(get, _ID_KEYS)
    score = _first(get, _SCORE_KEYS)
    return Document(
        content if isinstance(content, str) else to_text(content)[0],
        None if doc_id is None else str(doc_id),
        float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
    )


def _first(get: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        try:
            value = get(key)
        except Exception:
            continue
        if value is not None:
            return value
    return None


class RetrievalMemory:
    """Documents retrieved so far, per trace id; bounded so an unfinished trace cannot leak.

    A trace is forgotten when its local root span ends; the bound covers traces whose
    root is not a tracefact span.
    """

    def __init__(self, max_traces: int = 4096, max_documents: int = 256) -> None:
        self._max_traces = max_traces
        self._max_documents = max_documents
        self._by_trace: OrderedDict[int, list[str]] = OrderedDict()
        self._lock = threading.Lock()  # guards _by_trace across application threads

    def remember(self, trace_id: int, contents: list[str]) -> None:
        with self._lock:
            known = self._by_trace.setdefault(trace_id, [])
            known.extend(contents[: max(0, self._max_documents - len(known))])
            self._by_trace.move_to_end(trace_id)
            while len(self._by_trace) > self._max_traces:
                self._by_trace.popitem(last=False)

    def recall(self, trace_id: int) -> list[str]:
        if not self._by_trace:  # the common case, checked without the lock
            return []
        with self._lock:
            return list(self._by_trace.get(trace_id, ()))

    def forget(self, trace_id: int) -> None:
        if trace_id not in self._by_trace:  # racing a remember() of another trace is harmless
            return
        with self._lock:
            self._by_trace.pop(trace_id, None)


retrieval_memory = RetrievalMemory()
