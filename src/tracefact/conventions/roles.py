"""What a span is, in any convention: an LLM call, a retrieval, a tool call, or something else.

An agent's own span (OpenInference AGENT, GenAI `invoke_agent`) has no role: it repeats
the answer of its last LLM span, which is the one judged.

Runs on the application's thread for every span, so it is a few dictionary lookups.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from tracefact import semconv

Role = Literal["llm", "retriever", "tool"]
# litellm's own OpenTelemetry callback writes its function's name ("acompletion").
_LLM_OPERATIONS = frozenset(
    {"chat", "text_completion", "generate_content", "completion", "acompletion"}
)
_OPENLLMETRY_LLM_TYPES = frozenset({"chat", "completion", "acompletion"})
_DB_SYSTEM = semconv.DB_SYSTEM
_VECTOR_DB_SYSTEMS = semconv.VECTOR_DB_SYSTEMS
_RETRIEVAL_OPERATIONS = frozenset(
    {semconv.GEN_AI_OPERATION_RETRIEVAL, semconv.OPENLLMETRY_OPERATION_RETRIEVE}
)
LLM_ROLE_KEYS = frozenset(
    {
        semconv.OPENINFERENCE_SPAN_KIND,
        semconv.GEN_AI_OPERATION_NAME,
        semconv.OPENLLMETRY_REQUEST_TYPE,
    }
)
"""The attributes that can make a span an LLM span: a span with none of them is not one."""
ROLE_KEYS = LLM_ROLE_KEYS | {semconv.DB_SYSTEM, semconv.TRACELOOP_SPAN_KIND}
"""The attributes `span_role` looks at: a span with none of them has no role."""


def span_role(attributes: Mapping[str, Any]) -> Role | None:
    """The span's role: "llm", "retriever", "tool" (a tool's execution) or None."""
    kind = attributes.get(semconv.OPENINFERENCE_SPAN_KIND)
    if kind is not None:
        return _OPENINFERENCE_ROLES.get(kind) if isinstance(kind, str) else None
    operation = attributes.get(semconv.GEN_AI_OPERATION_NAME)
    if isinstance(operation, str):  # an OTLP kvlist decodes to a dict: not hashable
        if operation in _LLM_OPERATIONS:
            return "llm"
        if operation in _RETRIEVAL_OPERATIONS:
            return "retriever"
        return "tool" if operation == semconv.GEN_AI_OPERATION_EXECUTE_TOOL else None
    request_type = attributes.get(semconv.OPENLLMETRY_REQUEST_TYPE)
    if isinstance(request_type, str) and request_type in _OPENLLMETRY_LLM_TYPES:
        return "llm"
    system = attributes.get(_DB_SYSTEM)
    if isinstance(system, str):  # a database client's span: never a tool's
        # OpenLLMetry's vector DB spans are retrievers; their results are events.
        return "retriever" if system in _VECTOR_DB_SYSTEMS else None
    if attributes.get(semconv.TRACELOOP_SPAN_KIND) == semconv.TRACELOOP_KIND_TOOL:
        return "tool"
    return None


_OPENINFERENCE_ROLES: dict[str, Role] = {
    semconv.KIND_LLM: "llm",
    semconv.KIND_RETRIEVER: "retriever",
    semconv.KIND_TOOL: "tool",
}
