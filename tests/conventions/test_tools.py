"""Tool results as evidence: recorded agent frameworks, every message format, bad results."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conventions.fixtures import AGENT_FIXTURES, AGENT_FRAMEWORKS, fixture_names, load
from tests.fakes.agents import ANSWERS, CALL_ID, TOOL
from tests.fakes.instrumentors import DOCUMENT, QUESTION
from tracefact import semconv
from tracefact.conventions import ReadOptions, read_case, span_role
from tracefact.conventions.otlp import OtlpSpan
from tracefact.conventions.tools import (
    MAX_RESULT_CHARS,
    ToolResult,
    evidence_text,
    tool_span_result,
)
from tracefact.evaluators.lexical import LexicalOverlap

AGENT_RUNS = fixture_names(AGENT_FIXTURES)


def test_every_framework_scenario_and_mode_was_recorded() -> None:
    expected = {
        f"{framework}-{scenario}-{mode}"
        for framework in AGENT_FRAMEWORKS
        for scenario in ANSWERS
        for mode in ("plain", "stream")
    }
    assert set(AGENT_RUNS) == expected


DEFAULT = ReadOptions()


def read_trace(spans: list[OtlpSpan], options: ReadOptions = DEFAULT) -> list[Any]:
    """Each LLM span's reading, with the tool spans that ended before it, in end order."""
    tools: list[ToolResult] = []
    readings = []
    for span in spans:
        role = span_role(span.attributes)
        if role == "tool":
            result = tool_span_result(span.attributes, span.events, span.end_time)
            tools += [result] if result is not None else []
        elif role == "llm":
            readings.append(
                read_case(
                    span.attributes,
                    span.events,
                    tools=tools,
                    ended=span.end_time,
                    options=options,
                )
            )
    return readings


@pytest.mark.parametrize("name", AGENT_RUNS)
def test_the_final_answer_is_read_against_the_tool_result(name: str) -> None:
    """The step that only calls the tool is skipped; the answer is judged on its result."""
    spans = load(name, AGENT_FIXTURES)
    tool_step, final = read_trace(spans)
    assert tool_step.case is None and tool_step.skip_reason == semconv.SKIP_TOOL_CALL
    assert final.case is not None, final.skip_reason
    assert final.contexts_source == semconv.CONTEXT_SOURCE_TOOL
    assert final.case.contexts == [DOCUMENT]
    assert final.tool_calls == (CALL_ID,)
    assert final.case.input == QUESTION
    assert final.case.output == ANSWERS[name.split("-")[1]]


@pytest.mark.parametrize("name", AGENT_RUNS)
def test_the_prompt_alone_holds_the_tool_result(name: str) -> None:
    """Without the trace's tool spans, the tool message in the LLM span's input is evidence.

    As when the tool span was sent by another process, or not at all.
    """
    spans = [s for s in load(name, AGENT_FIXTURES) if span_role(s.attributes) != "tool"]
    final = read_trace(spans)[-1]
    assert final.case is not None and final.case.contexts == [DOCUMENT]
    assert final.contexts_source == semconv.CONTEXT_SOURCE_TOOL


@pytest.mark.parametrize("name", AGENT_RUNS)
def test_agent_spans_repeat_the_answer_and_have_no_role(name: str) -> None:
    spans = load(name, AGENT_FIXTURES)
    agents = [
        s
        for s in spans
        if s.attributes.get(semconv.OPENINFERENCE_SPAN_KIND) == semconv.KIND_AGENT
        or s.attributes.get(semconv.GEN_AI_OPERATION_NAME) == semconv.GEN_AI_OPERATION_INVOKE_AGENT
    ]
    assert agents
    assert all(span_role(s.attributes) is None for s in agents)
    assert [span_role(s.attributes) for s in spans].count("llm") == 2


@pytest.mark.parametrize("framework", AGENT_FRAMEWORKS)
@pytest.mark.parametrize("mode", ["plain", "stream"])
async def test_grounded_and_invented_answers_get_the_right_labels(
    framework: str, mode: str
) -> None:
    labels = {}
    for scenario in ANSWERS:
        final = read_trace(load(f"{framework}-{scenario}-{mode}", AGENT_FIXTURES))[-1]
        labels[scenario] = (await LexicalOverlap().evaluate(final.case)).label
    assert labels == {"grounded": "factual", "invented": "hallucinated"}


@pytest.mark.parametrize("framework", AGENT_FRAMEWORKS)
def test_an_excluded_tool_is_not_evidence(framework: str) -> None:
    """Named in exclude_tools, neither its span nor its message in the prompt counts."""
    spans = load(f"{framework}-grounded-plain", AGENT_FIXTURES)
    final = read_trace(spans, ReadOptions(exclude_tools=frozenset({TOOL})))[-1]
    assert final.skip_reason == semconv.SKIP_NO_CONTEXTS


# --- every message format -------------------------------------------------------------
ANSWER_TEXT = "The tower is 330 metres tall."
ANSWER = {semconv.OUTPUT_VALUE: ANSWER_TEXT}
OPENAI_CALL = {"id": "c1", "type": "function", "function": {"name": "facts", "arguments": "{}"}}


def contexts_of(attributes: dict[str, Any], **kwargs: Any) -> tuple[list[str], tuple[str, ...]]:
    reading = read_case({**ANSWER, **attributes}, **kwargs)
    assert reading.case is not None, reading.skip_reason
    return reading.case.contexts, reading.tool_calls


def test_openinference_tool_messages_of_every_turn() -> None:
    attributes = {
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "How tall?",
        "llm.input_messages.1.message.role": "assistant",
        "llm.input_messages.1.message.tool_calls.0.tool_call.id": "c1",
        "llm.input_messages.1.message.tool_calls.0.tool_call.function.name": "facts",
        "llm.input_messages.2.message.role": "tool",
        "llm.input_messages.2.message.tool_call_id": "c1",
        "llm.input_messages.2.message.content": "330 metres.",
        "llm.input_messages.3.message.role": "tool",
        "llm.input_messages.3.message.name": "more_facts",
        "llm.input_messages.3.message.content": "Completed in 1889.",
    }
    assert contexts_of(attributes) == (["330 metres.", "Completed in 1889."], ("c1", "more_facts"))
    excluded = ReadOptions(exclude_tools=frozenset({"facts"}))  # named by its call
    assert contexts_of(attributes, options=excluded) == (["Completed in 1889."], ("more_facts",))


def test_openai_chat_json_tool_messages() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "How tall?"},
            {"role": "assistant", "content": None, "tool_calls": [OPENAI_CALL]},
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "330 m"}]},
        ]
    }
    attributes = {
        semconv.INPUT_VALUE: json.dumps(body),
        semconv.INPUT_MIME_TYPE: "application/json",
    }
    assert contexts_of(attributes) == (["330 m"], ("c1",))
    assert read_case({**ANSWER, **attributes}).case.input == "How tall?"  # type: ignore[union-attr]


def test_genai_message_events() -> None:
    events = [
        ("gen_ai.user.message", {"content": "How tall?"}),
        ("gen_ai.assistant.message", {"tool_calls": json.dumps([OPENAI_CALL])}),
        ("gen_ai.tool.message", {"id": "c1", "content": "330 metres."}),
        ("gen_ai.choice", {"index": 0, "message": json.dumps({"content": ANSWER_TEXT})}),
    ]
    reading = read_case({semconv.GEN_AI_OPERATION_NAME: "chat"}, events)
    assert reading.case is not None, reading.skip_reason
    assert (reading.case.input, reading.case.output) == ("How tall?", ANSWER_TEXT)
    assert (reading.case.contexts, reading.tool_calls) == (["330 metres."], ("c1",))


def test_genai_tool_call_response_parts() -> None:
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": "How tall?"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "facts"}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "330"}]},
        {"role": "user", "parts": [{"type": "tool_call_response", "id": "c2", "result": "1889"}]},
    ]
    attributes = {semconv.GEN_AI_INPUT_MESSAGES: json.dumps(messages)}
    assert contexts_of(attributes) == (["330", "1889"], ("c1", "c2"))


def test_anthropic_tool_result_blocks() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "How tall?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "facts"}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "330 metres"},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "no", "is_error": True},
                ],
            },
        ]
    }
    assert contexts_of({semconv.INPUT_VALUE: json.dumps(body)}) == (["330 metres"], ("t1",))


def test_gemini_function_response_parts() -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "How tall?"}]},
            {"role": "model", "parts": [{"function_call": {"name": "facts", "args": {}}}]},
            {
                "role": "user",
                "parts": [{"function_response": {"name": "facts", "response": {"height_m": 330}}}],
            },
        ]
    }
    attributes = {semconv.INPUT_VALUE: json.dumps(body["contents"])}
    assert contexts_of(attributes) == (["height_m: 330"], ("facts",))


def test_openllmetry_indexed_tool_messages() -> None:
    attributes = {
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "How tall?",
        "gen_ai.prompt.1.role": "assistant",
        "gen_ai.prompt.1.tool_calls.0.id": "c1",
        "gen_ai.prompt.1.tool_calls.0.name": "facts",
        "gen_ai.prompt.2.role": "tool",
        "gen_ai.prompt.2.tool_call_id": "c1",
        "gen_ai.prompt.2.content": "330 metres",
    }
    assert contexts_of(attributes) == (["330 metres"], ("c1",))


def test_openai_responses_items() -> None:
    items = [
        {"role": "user", "content": "How tall?"},
        {"type": "function_call", "call_id": "c1", "name": "facts", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "330 metres"},
    ]
    assert contexts_of({semconv.INPUT_VALUE: json.dumps(items)}) == (["330 metres"], ("c1",))


@pytest.mark.parametrize(
    "output",
    [
        {
            semconv.GEN_AI_OUTPUT_MESSAGES: json.dumps(
                [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c"}]}]
            )
        },
        {
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c",
        },
        {"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.tool_calls.0.name": "facts"},
        {
            semconv.OUTPUT_VALUE: json.dumps(
                {"choices": [{"message": {"role": "assistant", "tool_calls": [OPENAI_CALL]}}]}
            )
        },
        {
            semconv.OUTPUT_VALUE: json.dumps(
                [
                    {
                        "object": "response",
                        "output": [{"type": "function_call", "call_id": "c", "name": "f"}],
                    }
                ]
            )
        },
    ],
    ids=["genai", "openinference", "openllmetry", "openai-body", "responses"],
)
def test_output_that_is_only_tool_calls_is_skipped_as_tool_call(output: dict[str, Any]) -> None:
    reading = read_case({**output, semconv.CONTEXTS: ("doc",)})
    assert reading.skip_reason == semconv.SKIP_TOOL_CALL


def test_answer_text_beside_tool_calls_is_judged() -> None:
    parts = [{"type": "text", "content": "Checking."}, {"type": "tool_call", "id": "c"}]
    output = json.dumps([{"role": "assistant", "parts": parts}])
    reading = read_case({semconv.GEN_AI_OUTPUT_MESSAGES: output, semconv.CONTEXTS: ("doc",)})
    assert reading.case is not None and reading.case.output == "Checking."


# --- tool spans ------------------------------------------------------------------------
def test_tool_spans_of_each_convention() -> None:
    genai = {
        semconv.GEN_AI_OPERATION_NAME: "execute_tool",
        semconv.GEN_AI_TOOL_NAME: "facts",
        semconv.GEN_AI_TOOL_CALL_ID: "c1",
        semconv.GEN_AI_TOOL_CALL_RESULT: '{"height_m": 330}',
    }
    openinference = {
        semconv.OPENINFERENCE_SPAN_KIND: "TOOL",
        semconv.TOOL_NAME: "facts",
        semconv.OUTPUT_VALUE: "330 metres",
    }
    openllmetry = {
        semconv.TRACELOOP_SPAN_KIND: "tool",
        semconv.TRACELOOP_ENTITY_NAME: "facts",
        semconv.TRACELOOP_ENTITY_OUTPUT: json.dumps({"height": "330 metres"}),
    }
    assert [span_role(a) for a in (genai, openinference, openllmetry)] == ["tool"] * 3
    assert tool_span_result(genai, (), 5) == ToolResult("height_m: 330", "c1", "facts", 5)
    assert tool_span_result(openinference) == ToolResult("330 metres", None, "facts")
    assert tool_span_result(openllmetry) == ToolResult("height: 330 metres", None, "facts")


def test_a_failed_tool_span_is_not_evidence() -> None:
    output = {semconv.OPENINFERENCE_SPAN_KIND: "TOOL", semconv.OUTPUT_VALUE: "Traceback..."}
    assert tool_span_result(output, [("exception", {"exception.type": "KeyError"})]) is None
    assert tool_span_result({**output, semconv.ERROR_TYPE: "KeyError"}) is None
    langchain_error = {
        "type": "tool",
        "data": {"type": "tool", "content": "Error", "status": "error"},
    }
    assert tool_span_result({**output, semconv.OUTPUT_VALUE: json.dumps(langchain_error)}) is None


def test_stored_tool_results_before_the_span_join_retrieved_documents() -> None:
    earlier, later = ToolResult("330 metres", "c1", "facts", 10), ToolResult("1889", "c2", None, 30)
    reading = read_case(ANSWER, retrieved=["a document"], tools=[earlier, later], ended=20)
    assert reading.case is not None and reading.case.contexts == ["a document", "330 metres"]
    assert reading.contexts_source == semconv.CONTEXT_SOURCE_TOOL_RETRIEVAL
    assert reading.tool_calls == ("c1",)
    explicit = read_case({**ANSWER, semconv.CONTEXTS: ("mine",)}, tools=[earlier])
    assert explicit.contexts_source == semconv.CONTEXT_SOURCE_EXPLICIT


def test_system_instructions_are_still_not_evidence() -> None:
    attributes = {
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "The tower is 330 metres tall.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": "How tall?",
    }
    assert read_case({**ANSWER, **attributes}).skip_reason == semconv.SKIP_NO_CONTEXTS


# --- what a result says -----------------------------------------------------------------
def test_structured_results_become_readable_lines() -> None:
    result = {"tower": {"name": "Eiffel", "height_m": 330}, "tags": ["iron", "Paris"], "x": None}
    assert evidence_text(json.dumps(result)) == (
        "tower.name: Eiffel\ntower.height_m: 330\ntags: iron, Paris"
    )
    assert evidence_text([{"city": "Paris"}, {"city": "Lyon"}]) == "city: Paris\ncity: Lyon"
    assert evidence_text('"a JSON string"') == "a JSON string"
    assert evidence_text(42) == "42"
    mcp = {"content": [{"type": "text", "text": "330 metres"}], "isError": False}
    assert evidence_text(mcp) == "330 metres"
    assert evidence_text({"error": None, "height": 330}) == "height: 330"


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "   ",
        "{}",
        "[]",
        b"\x89PNG",
        "<2048 bytes>",
        "data:image/png;base64,iVBORw0KGgo",
        "A" * 300,
        "\x00\x01\x02binary",
        {"error": "not found"},
        {"is_error": True, "content": "boom"},
        {"isError": True, "content": [{"type": "text", "text": "boom"}]},
        {"type": "image", "data": "..."},
    ],
    ids=range(14),
)
def test_error_empty_and_binary_results_are_not_evidence(value: Any) -> None:
    assert evidence_text(value) is None


def test_a_huge_result_is_cut_and_a_secret_scrubbed() -> None:
    text = evidence_text("key sk-abcdefghijklmnopqrstuvwxyz0123 " + "word " * 5000)
    assert text is not None and "sk-abcdef" not in text and "[SCRUBBED]" in text
    assert len(text) < MAX_RESULT_CHARS + 40 and text.endswith("chars]")


GARBAGE: list[Any] = [
    "[" * 3000,
    "{" * 3000,
    "x" * 2_000_000,
    42,
    (1, 2),
    {"kvlist": "from OTLP"},
    b"bytes",
    '{"type": "tool", "data": 5}',
    '[{"type": "function_call_output"}]',
]


@pytest.mark.parametrize("value", GARBAGE, ids=range(len(GARBAGE)))
@pytest.mark.parametrize(
    "key",
    [
        semconv.GEN_AI_TOOL_CALL_RESULT,
        semconv.OUTPUT_VALUE,
        "llm.input_messages.0.message.content",
        "llm.input_messages.0.message.tool_call_id",
        semconv.GEN_AI_INPUT_MESSAGES,
        semconv.INPUT_VALUE,
    ],
)
def test_garbage_tool_results_never_raise(key: str, value: Any) -> None:
    attributes = {
        semconv.OPENINFERENCE_SPAN_KIND: "TOOL",
        "llm.input_messages.0.message.role": "tool",
        key: value,
    }
    result = tool_span_result(attributes, ())
    assert result is None or len(result.text) <= MAX_RESULT_CHARS + 40
    reading = read_case({**ANSWER, **attributes}, tools=[result] if result else [])
    assert (reading.case is None) != (reading.skip_reason is None)
