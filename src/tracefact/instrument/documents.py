"""Retrieved documents: normalising whatever a retriever returns.

Remembering them per trace for later LLM spans is the processor's job
(`tracefact.conventions.DocumentStore`), for retriever spans of any instrumentation.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tracefact.instrument.capture import to_text

logger = logging.getLogger("tracefact")

_CONTENT_KEYS = ("content", "text", "page_content")
_ID_KEYS = ("id", "doc_id", "document_id")
_SCORE_KEYS = ("score", "relevance_score", "similarity")


@dataclass(frozen=True, slots=True)
class Document:
    content: str
    id: str | None = None
    score: float | None = None


def to_documents(result: Any) -> list[Document]:
    """Whatever a retriever returned, as a list of documents (never raises).

    An iterator or a generator gives none: reading it would consume what the caller
    gets back (or wait forever on an endless one). Any collection (a list, a tuple, a
    set, an array) is read.
    """
    if result is None:
        return []
    if isinstance(result, (str, bytes, Mapping)) or not isinstance(result, Iterable):
        return [to_document(result)]
    if not isinstance(result, Collection):
        _warn_not_read(type(result).__name__)
        return []
    return [to_document(item) for item in result]


_warned_not_read = False


def _warn_not_read(kind: str) -> None:
    """Say once per process why documents given as an iterator were not recorded."""
    global _warned_not_read
    if not _warned_not_read:
        _warned_not_read = True
        logger.warning(
            "tracefact: documents or contexts given as %s are not recorded, since reading "
            "them would consume them; pass a list",
            kind,
        )


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
