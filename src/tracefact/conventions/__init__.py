"""Reading LLM and retriever spans of every instrumentation convention.

Knows only the attribute conventions (tracefact's, OpenInference, OpenTelemetry GenAI,
OpenLLMetry) and the `EvalCase` they yield; no SDK, no pipeline. The in-process
processor and the collector read spans through this package and nothing else.
"""

from tracefact.conventions.documents import DocumentStore, retrieved_documents
from tracefact.conventions.mapping import MappingFunction, SpanMapping, compile_mapping
from tracefact.conventions.reader import Reading, ReadOptions, read_case
from tracefact.conventions.roles import LLM_ROLE_KEYS, ROLE_KEYS, Role, span_role

__all__ = [
    "LLM_ROLE_KEYS",
    "ROLE_KEYS",
    "DocumentStore",
    "MappingFunction",
    "ReadOptions",
    "Reading",
    "Role",
    "SpanMapping",
    "compile_mapping",
    "read_case",
    "retrieved_documents",
    "span_role",
]
