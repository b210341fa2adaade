"""Decoding attribute values that hold JSON, safely: garbage in gives None, never an error."""

from __future__ import annotations

import json
from typing import Any

MAX_JSON_CHARS = 1_000_000
"""Longer values are not decoded: a span attribute this large is not a chat message."""
MAX_DEPTH = 8
"""How deep `text_of` looks into message parts."""


def loads(value: Any) -> Any:
    """The decoded JSON value, or None for non-strings, non-JSON, huge or too deep values."""
    if not isinstance(value, str) or len(value) > MAX_JSON_CHARS:
        return None
    if not value.lstrip().startswith(("[", "{", '"')):
        return None
    try:
        return json.loads(value)
    except (ValueError, RecursionError):  # "[" * 3000 recurses past the C decoder's limit
        return None


def text_of(value: Any, depth: int = 0) -> str | None:
    """The text in a message content: a string, or the text parts of a part list.

    Understands OpenAI content parts (`{"type": "text", "text": ...}`), GenAI parts
    (`{"type": "text", "content": ...}`) and LangChain message dicts (`kwargs.content`).
    None when there is no text (only tool calls, images...).
    """
    if isinstance(value, str):
        return value
    if depth >= MAX_DEPTH:
        return None
    if isinstance(value, list):
        texts = [t for t in (text_of(item, depth + 1) for item in value[:1000]) if t]
        return "\n".join(texts) if texts else None
    if isinstance(value, dict):
        kind = value.get("type")
        if kind not in (None, "text", "output_text", "input_text") and "kwargs" not in value:
            return None  # tool calls, images, audio, reasoning: not answer text
        for key in ("text", "content"):
            if key in value:
                return text_of(value[key], depth + 1)
        kwargs = value.get("kwargs")
        if isinstance(kwargs, dict):
            return text_of(kwargs.get("content"), depth + 1)
    return None
