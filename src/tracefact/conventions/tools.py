"""Tool results as evidence: what an agent's tools returned, as text an evaluator can read.

A tool result reaches an LLM span two ways: as a tool message in the span's own input
(read by `messages`), and as a tool span of the same trace that ended before it
(`tool_span_result`, kept in the per-trace `DocumentStore` as retrieved documents are).
Both become a `ToolResult` through `evidence_text`, which is the one place that decides
what a result says: structured (JSON) results become readable ``key: value`` lines; a
result that is an error, empty or binary is not evidence (None); every text is bounded
(`MAX_RESULT_CHARS`) and scrubbed of secrets, as tracefact scrubs all it writes, since
the evidence is copied onto the evaluated span.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from tracefact import semconv
from tracefact.conventions._json import loads, text_of
from tracefact.scrubbing import clean_text

MAX_RESULT_CHARS = 8192
"""A tool result longer than this is cut (with `semconv.TRUNCATION_MARKER`)."""
MAX_RESULTS = 64
"""At most this many tool results ground one LLM span: the latest ones."""
MAX_LINES = 1000
"""A structured result is rendered up to this many ``key: value`` lines."""
_MAX_DEPTH = 8
_ERROR_FLAGS = ("is_error", "isError")
_ERROR_KEYS = frozenset({"error", "errors", "exception"})
_MCP_RESULT_KEYS = frozenset({"content", "isError", "structuredContent", "_meta"})
_TEXT_PART_TYPES = frozenset({"text", "output_text", "input_text"})
_BINARY_PART_TYPES = frozenset({"blob", "image", "audio", "file", "image_url", "input_audio"})
_BYTES_PLACEHOLDER = re.compile(r"<\d+ bytes>")
"""How tracefact's own capture records bytes (`instrument.capture`)."""
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/=]{200,}")
_ENTRY_PREFIX = "\x00tracefact.tool\x00"
_DOCUMENT_PREFIX = "\x00tracefact.document\x00"


class ToolResult(NamedTuple):
    """One tool call's result, as evidence."""

    text: str
    call_id: str | None = None
    name: str | None = None
    ended: int | None = None
    """When its tool span ended (unix nanoseconds); None for a message in the prompt."""

    @property
    def call(self) -> str:
        """How `tracefact.contexts.tool_calls` names the call: its id, else its tool's name."""
        return self.call_id or self.name or "tool"


_NOTHING = frozenset({"null", semconv.OPENINFERENCE_REDACTED})
"""Tool results that say nothing: a tool that returned None, a result an instrumentor hid."""


def evidence_text(value: Any, *, error: bool = False) -> str | None:
    """A tool's result as evidence text, or None when it is not evidence.

    Strings are read as they are, unless they hold JSON (then as the JSON value); JSON
    objects and lists become ``key: value`` lines. An error (`error`, an ``is_error``
    flag, an object with only error keys), an empty result and binary content give None.
    """
    if error or value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return None
    if isinstance(value, str):
        if value.strip() in _NOTHING:  # JSON's null, or OpenInference's hidden content
            return None
        decoded = loads(value)  # None unless the text is JSON
        value = value if decoded is None else decoded
    if isinstance(value, (dict, list, tuple)):
        if _is_error(value) or _is_binary_part(value):
            return None
        text = _text_parts(value)
        if text is None:
            text = "\n".join(_lines(value, "", 0)[:MAX_LINES])
    else:
        text = value if isinstance(value, str) else json.dumps(value)
    text = text.strip()
    kept = text[:MAX_RESULT_CHARS]  # what is checked and scrubbed is bounded too
    if not kept or _is_binary(kept):
        return None
    if len(text) > MAX_RESULT_CHARS:
        kept += semconv.TRUNCATION_MARKER.format(len(text) - MAX_RESULT_CHARS)
    return clean_text(kept)


def _is_error(value: Any) -> bool:
    if isinstance(value, dict):
        if any(value.get(flag) is True for flag in _ERROR_FLAGS):
            return True
        return set(value) <= _ERROR_KEYS and any(value.values())
    return False


def _text_parts(value: Any) -> str | None:
    """The text of message content parts (OpenAI's, MCP's `content`), else None."""
    if isinstance(value, dict) and set(value) <= _MCP_RESULT_KEYS:
        value = value.get("content")  # an MCP tool result (its error flag is checked before)
    if not isinstance(value, list) or not value:
        return None
    if not all(
        isinstance(part, str) or (isinstance(part, dict) and part.get("type") in _TEXT_PART_TYPES)
        for part in value
    ):
        return None
    return text_of(value) or ""


def _is_binary_part(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") in _BINARY_PART_TYPES


def _is_binary(text: str) -> bool:
    """Bytes, a data URI, base64 or control characters: nothing an answer rests on."""
    if "\x00" in text or text.startswith("data:") or _BYTES_PLACEHOLDER.fullmatch(text):
        return True
    if len(text) >= 200 and sum(len(m) for m in _BASE64_RUN.findall(text)) > len(text) / 2:
        return True
    sample = text[:4096]
    controls = sum(1 for c in sample if not c.isprintable() and c not in "\n\r\t")
    return controls > len(sample) / 10


def _lines(value: Any, path: str, depth: int) -> list[str]:
    """``key: value`` lines of a JSON value, nested keys joined with dots."""
    if depth >= _MAX_DEPTH:
        return []
    if isinstance(value, dict):
        lines: list[str] = []
        for key, item in list(value.items())[:MAX_LINES]:
            lines += _lines(item, f"{path}.{key}" if path else str(key), depth + 1)
        return lines
    if isinstance(value, (list, tuple)):
        if all(_is_scalar(item) for item in value):
            shown = ", ".join(_scalar(item) for item in value[:MAX_LINES] if item is not None)
            return [f"{path}: {shown}" if path else shown] if shown else []
        lines = []
        for item in value[:MAX_LINES]:
            lines += _lines(item, path, depth + 1)
        return lines
    if value is None or (isinstance(value, str) and not value.strip()):
        return []
    return [f"{path}: {_scalar(value)}" if path else _scalar(value)]


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _scalar(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


# --- tool spans -----------------------------------------------------------------------
def tool_span_result(
    attributes: Mapping[str, Any],
    events: Iterable[tuple[str, Mapping[str, Any]]] = (),
    ended: int | None = None,
) -> ToolResult | None:
    """The result of a tool span of any convention, or None when it is not evidence.

    GenAI's `gen_ai.tool.call.result`, OpenInference's `output.value` (a LangChain tool
    message is unwrapped), OpenLLMetry's `traceloop.entity.output`. A span that recorded
    an exception or an `error.type` failed: its output is not evidence.
    """
    failed = attributes.get(semconv.ERROR_TYPE) is not None or any(
        name == semconv.EXCEPTION_EVENT for name, _ in events
    )
    call_id = _text_or_none(
        attributes.get(semconv.GEN_AI_TOOL_CALL_ID) or attributes.get(semconv.TOOL_ID)
    )
    name = _text_or_none(
        attributes.get(semconv.GEN_AI_TOOL_NAME)
        or attributes.get(semconv.TOOL_NAME)
        or attributes.get(semconv.TRACELOOP_ENTITY_NAME)
    )
    for key in (
        semconv.GEN_AI_TOOL_CALL_RESULT,
        semconv.OUTPUT_VALUE,
        semconv.TRACELOOP_ENTITY_OUTPUT,
    ):
        value = attributes.get(key)
        if value is None:
            continue
        message = _langchain_tool_message(loads(value))
        if message is not None:  # LangChain's ToolMessage, as OpenInference records it
            value = message.get("content")
            failed = failed or message.get("status") == "error"
            call_id = call_id or _text_or_none(message.get("tool_call_id"))
            name = name or _text_or_none(message.get("name"))
        text = evidence_text(value, error=failed)
        return None if text is None else ToolResult(text, call_id, name, ended)
    return None


def _langchain_tool_message(value: Any) -> dict[str, Any] | None:
    """The fields of a serialised LangChain ToolMessage (`{"type": "tool", "data": ...}`)."""
    if not isinstance(value, dict):
        return None
    data = value.get("data") if value.get("type") == "tool" else value.get("kwargs")
    if isinstance(data, dict) and data.get("type") == "tool":
        return data
    return None


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# --- the per-trace store ---------------------------------------------------------------
def entry(result: ToolResult) -> str:
    """A tool result as an entry of the `DocumentStore` (which keeps and shares texts)."""
    return _ENTRY_PREFIX + json.dumps([result.text, result.call_id, result.name, result.ended])


def document_entry(text: str, ended: int | None) -> str:
    """A retrieved document as an entry of the `DocumentStore`.

    ended: when its retriever span ended (unix nanoseconds; None where unknown).
    """
    if ended is None:
        return text
    # The time, then the text as it is: no JSON to write here and parse in `split_entries`
    # (a retriever span is remembered on the application's thread).
    return f"{_DOCUMENT_PREFIX}{ended}\x00{text}"


def split_entries(
    entries: Sequence[str], ended: int | None = None
) -> tuple[list[str], list[ToolResult]]:
    """A trace's stored entries: the retrieved documents, and the tool results.

    ended: an LLM span's end; documents of retriever spans that ended after it are left
    out (None: none are). A collector may see such a retriever span before it reads the
    LLM span: its documents cannot have grounded that answer.
    """
    documents: list[str] = []
    results: list[ToolResult] = []
    for stored in entries:
        if stored.startswith(_DOCUMENT_PREFIX):
            retrieved, _, text = stored[len(_DOCUMENT_PREFIX) :].partition("\x00")
            if retrieved.isascii() and retrieved.isdigit():
                if ended is None or int(retrieved) <= ended:
                    documents.append(text)
                continue
        result = _decoded(stored) if stored.startswith(_ENTRY_PREFIX) else None
        if result is None:
            documents.append(stored)
        else:
            results.append(result)
    return documents, results


def _decoded(stored: str) -> ToolResult | None:
    fields = loads(stored[len(_ENTRY_PREFIX) :])
    if not (isinstance(fields, list) and len(fields) == 4 and isinstance(fields[0], str)):
        return None
    text, call_id, name, ended = fields
    return ToolResult(
        text,
        call_id if isinstance(call_id, str) else None,
        name if isinstance(name, str) else None,
        ended if isinstance(ended, int) else None,
    )


# --- one span's evidence ---------------------------------------------------------------
def judged_results(
    in_prompt: Sequence[ToolResult],
    stored: Sequence[ToolResult],
    ended: int | None,
    excluded: frozenset[str],
) -> list[ToolResult]:
    """The tool results one LLM span is judged against, each once.

    Its prompt's own first (what the model saw), then the trace's tool spans that ended
    before it (`ended`, unix nanoseconds; None: all of them) that the prompt does not
    already hold (same call id or same text); tools named in `excluded` are left out;
    the latest `MAX_RESULTS`.
    """
    chosen: list[ToolResult] = []
    ids: set[str] = set()
    texts: set[str] = set()
    for result in (*in_prompt, *stored):
        if result.name is not None and result.name in excluded:
            continue
        if result.ended is not None and ended is not None and result.ended > ended:
            continue
        if (result.call_id is not None and result.call_id in ids) or result.text in texts:
            continue
        chosen.append(result)
        texts.add(result.text)
        if result.call_id is not None:
            ids.add(result.call_id)
    return chosen[-MAX_RESULTS:]
