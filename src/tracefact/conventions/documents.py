"""Retrieved documents: read off retriever spans, and kept per trace for later LLM spans.

`DocumentStore` is the one place documents wait between a retriever span ending and an
LLM span of the same trace being read; the in-process processor and the collector both
use it. It is bounded by bytes, traces, documents per trace and age, and counts what it
evicts, so an unfinished trace can never grow memory.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeGuard

from tracefact import semconv
from tracefact.conventions import _json

MAX_DOCUMENTS = 1000


def retrieved_documents(
    attributes: Mapping[str, Any], events: Iterable[tuple[str, Mapping[str, Any]]] = ()
) -> list[str]:
    """The texts a retriever span of any convention returned, in order.

    OpenInference's and tracefact's `retrieval.documents.N.document.content`; the GenAI
    conventions' `gen_ai.retrieval.documents` (a JSON array of document objects);
    OpenLLMetry's LangChain retriever output (`traceloop.entity.output`) and its vector
    DB `db.query.result` events (`events` as (name, attributes) pairs). Entries without
    text (ids only, content capture off, garbage) are left out.
    """
    texts = _openinference_documents(attributes)
    if texts:
        return texts
    texts = _gen_ai_documents(attributes.get(semconv.GEN_AI_RETRIEVAL_DOCUMENTS))
    if texts:
        return texts
    output = _json.loads(attributes.get(semconv.TRACELOOP_ENTITY_OUTPUT))
    if isinstance(output, dict):
        texts = _gen_ai_documents(output.get("documents"))
        if texts:
            return texts
    for name, event_attributes in events:
        if name == semconv.DB_QUERY_RESULT_EVENT:
            content = event_attributes.get(semconv.DB_QUERY_RESULT_DOCUMENT)
            if _is_text(content):
                texts.append(content)
                if len(texts) >= MAX_DOCUMENTS:
                    break
    return texts


def _openinference_documents(attributes: Mapping[str, Any]) -> list[str]:
    texts = []
    for i in range(MAX_DOCUMENTS):
        content = attributes.get(semconv.retrieval_document(i, semconv.DOCUMENT_CONTENT))
        if content is None:
            if attributes.get(semconv.retrieval_document(i, semconv.DOCUMENT_ID)) is None:
                break
            continue
        if _is_text(content):
            texts.append(content)
    return texts


def _gen_ai_documents(value: Any) -> list[str]:
    """`[{"id": ..., "score": ..., "content": ...}, ...]`: the contents that are text.

    Also LangChain's `{"page_content": ...}` documents and plain strings.
    """
    documents = _json.loads(value) if isinstance(value, str) else value
    if not isinstance(documents, (list, tuple)):
        return []
    texts = []
    for document in documents[:MAX_DOCUMENTS]:
        if isinstance(document, dict):
            document = next((document[k] for k in _CONTENT_KEYS if k in document), None)
        text = _json.text_of(document)
        if _is_text(text):
            texts.append(text)
    return texts


_CONTENT_KEYS = ("content", "text", "page_content")


def _is_text(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and bool(value.strip())


EVICTED_BYTES = "bytes"
EVICTED_TRACES = "traces"
EVICTED_DOCUMENTS = "documents"
EVICTED_AGE = "age"


class _Trace:
    __slots__ = ("size", "texts", "touched")

    def __init__(self, touched: float) -> None:
        self.texts: list[str] = []
        self.size = 0
        self.touched = touched


class DocumentStore:
    """Documents retrieved so far, per trace id, within fixed bounds.

    max_bytes: total UTF-8 size of all documents held; the least recently added-to
        traces go first.
    max_traces: traces held at once. max_documents: documents kept per trace (later
        ones are not kept). max_age_seconds: a trace not added to for this long is
        forgotten (its root may never end in this process).
    Every document that leaves other than by `forget` is counted in `evictions`, by
    reason (bytes, traces, documents, age).
    """

    def __init__(
        self,
        *,
        max_bytes: int = 16 * 1024 * 1024,
        max_traces: int = 4096,
        max_documents: int = 256,
        max_age_seconds: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if min(max_bytes, max_traces, max_documents) < 1 or max_age_seconds <= 0:
            raise ValueError("DocumentStore bounds must be positive")
        self.max_bytes = max_bytes
        self.max_traces = max_traces
        self.max_documents = max_documents
        self.max_age_seconds = max_age_seconds
        self._clock = clock
        self.traces: OrderedDict[int, _Trace] = OrderedDict()
        """The traces that have documents, oldest first; read-only outside this class."""
        self._size = 0
        self._evictions: Counter[str] = Counter()
        self._lock = threading.Lock()  # application threads add; the worker reads

    def add(self, trace_id: int, texts: Sequence[str]) -> None:
        now = self._clock()
        with self._lock:
            self._expire(now)
            entry = self.traces.get(trace_id)
            if entry is None:
                entry = self.traces[trace_id] = _Trace(now)
            self.traces.move_to_end(trace_id)
            entry.touched = now
            room = self.max_documents - len(entry.texts)
            if len(texts) > room:
                self._evictions[EVICTED_DOCUMENTS] += len(texts) - max(room, 0)
            for text in texts[: max(room, 0)]:
                size = len(text.encode("utf-8", "surrogatepass"))
                if size > self.max_bytes:
                    self._evictions[EVICTED_BYTES] += 1
                    continue
                entry.texts.append(text)
                entry.size += size
                self._size += size
            while len(self.traces) > self.max_traces:
                self._evict_oldest(EVICTED_TRACES)
            while self._size > self.max_bytes:
                self._evict_oldest(EVICTED_BYTES)

    def documents(self, trace_id: int) -> list[str]:
        if not self.traces:  # the common case, checked without the lock
            return []
        with self._lock:
            self._expire(self._clock())
            entry = self.traces.get(trace_id)
            return list(entry.texts) if entry is not None else []

    def forget(self, trace_id: int) -> None:
        """The trace is over (its local root ended): its documents are not needed."""
        if trace_id not in self.traces:  # racing an add() of another trace is harmless
            return
        with self._lock:
            entry = self.traces.pop(trace_id, None)
            if entry is not None:
                self._size -= entry.size

    @property
    def evictions(self) -> dict[str, int]:
        """Documents evicted so far, by reason."""
        with self._lock:
            return dict(self._evictions)

    def __len__(self) -> int:
        return len(self.traces)

    def _expire(self, now: float) -> None:
        while self.traces:
            oldest = next(iter(self.traces.values()))
            if now - oldest.touched < self.max_age_seconds:
                return
            self._evict_oldest(EVICTED_AGE)

    def _evict_oldest(self, reason: str) -> None:
        _, entry = self.traces.popitem(last=False)
        self._size -= entry.size
        self._evictions[reason] += len(entry.texts)
