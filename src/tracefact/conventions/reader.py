"""From one LLM span's attributes and events to the case to judge, or why there is none.

Contexts are taken from the first of these that has any (the span records which in
`tracefact.contexts.source`): `tracefact.contexts` (set explicitly or by
`tracefact.grounding`), the trace's evidence (documents of earlier retriever spans, passed
in as `retrieved`, and tool results: the prompt's tool messages and earlier tool spans of
the trace, passed in as `tools`; used together), context-like prompt template variables,
the user's mapping, and, only when enabled, the prompt's own non-question messages.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracefact import semconv
from tracefact.conventions._json import loads, text_of
from tracefact.conventions.mapping import MappingFunction, apply_mapping
from tracefact.conventions.messages import Event, conversation
from tracefact.conventions.tools import ToolResult, judged_results
from tracefact.evaluators.base import EvalCase

logger = logging.getLogger("tracefact")

REDACTED = semconv.OPENINFERENCE_REDACTED
"""What OpenInference writes in place of hidden content."""
_QUESTION_VARIABLES = ("question", "query", "input", "user_input", "user_question")
_CONTEXT_VARIABLES = ("context", "contexts", "documents", "docs", "sources", "retrieved")
_CAPTURE_OFF_MARKERS = (semconv.OUTPUT_LENGTH, semconv.OUTPUT_SHA256)


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """How contexts are found beyond the conventions (see `tracefact.configure`)."""

    mapping: MappingFunction | None = None
    contexts_from_prompt: bool = False
    exclude_tools: frozenset[str] = frozenset()
    """Tools (by name) whose results are not evidence (one that echoes its input)."""


@dataclass(frozen=True, slots=True)
class Reading:
    """The case to judge and where its contexts came from, or why the span is skipped."""

    case: EvalCase | None
    contexts_source: str | None = None
    skip_reason: str | None = None
    nested_in: str | None = None
    """With skip reason `nested`: the enclosing LLM span's id (16 hex digits)."""
    tool_calls: tuple[str, ...] = ()
    """The tool calls whose results are among the contexts (ids, else tool names)."""

    def skip_attributes(self) -> dict[str, str]:
        """What a skipped span records about why."""
        found = {semconv.EVAL_SKIP_REASON: self.skip_reason or semconv.SKIP_NO_ANSWER}
        if self.nested_in is not None:
            found[semconv.EVAL_NESTED_IN] = self.nested_in
        return found


def read_case(
    attributes: Mapping[str, Any],
    events: Sequence[Event] = (),
    *,
    retrieved: Sequence[str] = (),
    tools: Sequence[ToolResult] = (),
    grounding: Sequence[str] = (),
    ended: int | None = None,
    options: ReadOptions = ReadOptions(),
) -> Reading:
    """Never raises: whatever the span holds, the result is a case or a skip reason.

    tools: results of the trace's tool spans; those that ended after `ended` (the span's
    end, unix nanoseconds) are left out. grounding: documents of a `tracefact.grounding`
    block not yet on the span (for spans recognised as LLM spans only as they end).
    """
    try:
        return _read(attributes, events, retrieved, tools, grounding, ended, options)
    except Exception:  # a reader bug must cost one evaluation, not the worker
        logger.exception("tracefact: could not read the span")
        return Reading(None, skip_reason=semconv.SKIP_NOT_TEXT)


def _read(
    attributes: Mapping[str, Any],
    events: Sequence[Event],
    retrieved: Sequence[str],
    tools: Sequence[ToolResult],
    grounding: Sequence[str],
    ended: int | None,
    options: ReadOptions,
) -> Reading:
    found = conversation(attributes, events)
    mapped: dict[str, Any] | None = None

    def mapping() -> dict[str, Any]:
        nonlocal mapped
        if mapped is None:
            mapped = apply_mapping(options.mapping, attributes) if options.mapping else {}
        return mapped

    if attributes.get(semconv.OUTPUT_NOT_TEXT) is not None:  # tracefact saw a non-text output
        return Reading(None, skip_reason=semconv.SKIP_NOT_TEXT)
    answer = found.answer_text() if found is not None else None
    if answer is None:
        answer = mapping().get("answer")
    # A call that raised left no answer whether capture was on or not: `no_answer`.
    if answer == REDACTED or (
        answer is None
        and not any(name == semconv.EXCEPTION_EVENT for name, _ in events)
        and _capture_off(attributes, found is None)
    ):
        return Reading(None, skip_reason=semconv.SKIP_CAPTURE_OFF)
    if answer is None:
        if found is not None and found.answer_calls():
            return Reading(None, skip_reason=semconv.SKIP_TOOL_CALL)
        not_text = found is not None and bool(found.answer)
        return Reading(
            None, skip_reason=semconv.SKIP_NOT_TEXT if not_text else semconv.SKIP_NO_ANSWER
        )
    if not answer.strip():
        return Reading(None, skip_reason=semconv.SKIP_NO_ANSWER)
    variables = loads(attributes.get(semconv.LLM_PROMPT_TEMPLATE_VARIABLES))
    if not isinstance(variables, dict):
        variables = {}
    question = (found.user_question() if found is not None else None) or mapping().get("question")
    if question is None:
        question = _first_variable(variables, _QUESTION_VARIABLES) or ""
    if question == REDACTED:  # OpenInference's hidden input: no question, not that word
        question = ""

    contexts, source = _explicit_contexts(attributes)
    if source is None and attributes.get(semconv.CONTEXTS_COUNT) is not None:
        return Reading(None, skip_reason=semconv.SKIP_CAPTURE_OFF)
    if not contexts and grounding:
        contexts, source = list(grounding), semconv.CONTEXT_SOURCE_GROUNDING
    tool_calls: tuple[str, ...] = ()
    if not contexts:
        results = judged_results(
            found.tool_results() if found is not None else (), tools, ended, options.exclude_tools
        )
        contexts = [*retrieved, *(result.text for result in results)]
        source = _EVIDENCE_SOURCES[bool(retrieved), bool(results)]
        tool_calls = tuple(result.call for result in results)
    if not contexts:
        texts = _variable_texts(variables, _CONTEXT_VARIABLES)
        contexts, source = texts, semconv.CONTEXT_SOURCE_TEMPLATE
    if not contexts:
        contexts, source = mapping().get("contexts", []), semconv.CONTEXT_SOURCE_MAPPING
    if not contexts and options.contexts_from_prompt and found is not None:
        contexts, source = found.prompt_evidence(), semconv.CONTEXT_SOURCE_PROMPT
    if not contexts:
        return Reading(None, skip_reason=semconv.SKIP_NO_CONTEXTS)
    case = EvalCase(input=question, contexts=contexts, output=answer)
    return Reading(case, source, tool_calls=tool_calls)


_EVIDENCE_SOURCES: dict[tuple[bool, bool], str | None] = {
    (True, False): semconv.CONTEXT_SOURCE_RETRIEVAL,
    (False, True): semconv.CONTEXT_SOURCE_TOOL,
    (True, True): semconv.CONTEXT_SOURCE_TOOL_RETRIEVAL,
    (False, False): None,
}
"""The source of a trace's evidence, by (retrieved documents, tool results) found."""


def _capture_off(attributes: Mapping[str, Any], no_content: bool) -> bool:
    """Whether content capture was off.

    tracefact's hashes instead of content, or an instrumentor that recorded no message
    content at all (openai-v2 without its opt-in, OpenLLMetry with
    TRACELOOP_TRACE_CONTENT=false).
    """
    return no_content or any(attributes.get(key) is not None for key in _CAPTURE_OFF_MARKERS)


def _explicit_contexts(attributes: Mapping[str, Any]) -> tuple[list[str], str | None]:
    value = attributes.get(semconv.CONTEXTS)
    if value is None:
        return [], None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        return [], None
    texts = [item for item in items if isinstance(item, str) and item.strip()]
    source = attributes.get(semconv.CONTEXTS_SOURCE)
    if source not in semconv.CONTEXT_SOURCES:
        source = semconv.CONTEXT_SOURCE_EXPLICIT
    return texts, source if texts else None


def _first_variable(variables: Mapping[str, Any], names: Sequence[str]) -> str | None:
    texts = _variable_texts(variables, names)
    return texts[0] if texts else None


def _variable_texts(variables: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    for name in names:
        value = variables.get(name)
        if value is None:
            continue
        items = value if isinstance(value, list) else [value]
        texts = [t for t in (text_of(item) for item in items[:1000]) if t and t.strip()]
        if texts:
            return texts
    return []
