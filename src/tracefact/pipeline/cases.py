"""Reading an evaluation case out of a span's attributes.

Knows the attribute conventions tracefact understands; a future collector adds more here,
not elsewhere.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tracefact import semconv
from tracefact.evaluators.base import EvalCase

_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})


def is_llm_span(attributes: Mapping[str, Any]) -> bool:
    """An LLM call in OpenInference or OpenTelemetry GenAI terms."""
    kind = attributes.get(semconv.OPENINFERENCE_SPAN_KIND)
    if kind is not None:
        return bool(kind == semconv.KIND_LLM)
    return attributes.get(semconv.GEN_AI_OPERATION_NAME) in _LLM_OPERATIONS


def is_evaluable(attributes: Mapping[str, Any]) -> bool:
    """Cheap check, on the application's thread, that there is an answer and contexts."""
    output = attributes.get(semconv.OUTPUT_VALUE)
    return (
        isinstance(output, str) and bool(output.strip()) and bool(attributes.get(semconv.CONTEXTS))
    )


def case_from_attributes(attributes: Mapping[str, Any]) -> EvalCase | None:
    """The case to judge, or None when the span lacks an output or contexts (skipped)."""
    output = attributes.get(semconv.OUTPUT_VALUE)
    contexts = attributes.get(semconv.CONTEXTS)
    if not isinstance(output, str) or not output.strip() or not contexts:
        return None
    texts = [c for c in contexts if isinstance(c, str) and c.strip()]
    if not texts:
        return None
    return EvalCase(
        input=_question(attributes.get(semconv.INPUT_VALUE)), contexts=texts, output=output
    )


def _question(value: Any) -> str:
    """The question in plain text; a JSON message list yields its last user message."""
    if not isinstance(value, str):
        return ""
    if not value.startswith(("[", "{")):
        return value
    try:
        decoded = json.loads(value)
    except ValueError:
        return value
    messages = decoded.get("messages") if isinstance(decoded, dict) else decoded
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                return content if isinstance(content, str) else json.dumps(content)
    return value
