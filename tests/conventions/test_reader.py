"""The span reader on what real instrumentors emitted (recorded fixtures), and on garbage."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conventions.fixtures import INSTRUMENTORS, fixture_names, load
from tests.fakes.instrumentors import DOCUMENT, QUESTION, SCENARIOS
from tracefact import semconv
from tracefact.conventions import (
    ReadOptions,
    compile_mapping,
    read_case,
    retrieved_documents,
    span_role,
)
from tracefact.evaluators.lexical import LexicalOverlap

ANSWERS = {s.name: s.answer for s in SCENARIOS}
PROMPT = ReadOptions(contexts_from_prompt=True)


def test_every_instrumentor_and_mode_was_recorded() -> None:
    names = set(fixture_names())
    for instrumentor in INSTRUMENTORS:
        for scenario in ("grounded", "invented"):
            for mode in ("plain", "stream"):
                assert f"{instrumentor}-{scenario}-{mode}" in names


@pytest.mark.parametrize("name", fixture_names())
def test_each_recorded_llm_span_yields_the_question_and_the_answer_text(name: str) -> None:
    llm = [s for s in load(name) if span_role(s.attributes) == "llm"]
    assert len(llm) == 1
    reading = read_case(llm[0].attributes, llm[0].events, options=PROMPT)
    assert reading.case is not None, reading.skip_reason
    scenario = name.split("-")[1]
    assert reading.case.output == ANSWERS[scenario]  # never the raw response body
    assert QUESTION in reading.case.input
    assert not reading.case.input.startswith(("{", "["))


@pytest.mark.parametrize("name", fixture_names())
def test_without_a_context_source_a_recorded_span_is_skipped_as_no_contexts(name: str) -> None:
    llm = next(s for s in load(name) if span_role(s.attributes) == "llm")
    reading = read_case(llm.attributes, llm.events)
    assert reading.case is None
    assert reading.skip_reason == semconv.SKIP_NO_CONTEXTS


@pytest.mark.parametrize("instrumentor", INSTRUMENTORS)
@pytest.mark.parametrize("mode", ["plain", "stream"])
async def test_grounded_and_invented_answers_get_the_right_labels(
    instrumentor: str, mode: str
) -> None:
    """With prompt contexts on, a deterministic evaluator tells grounded from invented.

    The system message holds the document.
    """
    labels = {}
    for scenario in ("grounded", "invented"):
        llm = next(s for s in load(f"{instrumentor}-{scenario}-{mode}") if span_role(s.attributes))
        reading = read_case(llm.attributes, llm.events, options=PROMPT)
        assert reading.case is not None
        assert reading.contexts_source == semconv.CONTEXT_SOURCE_PROMPT
        assert any(DOCUMENT in c for c in reading.case.contexts)
        labels[scenario] = (await LexicalOverlap().evaluate(reading.case)).label
    assert labels == {"grounded": "factual", "invented": "hallucinated"}


@pytest.mark.parametrize("mode", ["plain", "stream"])
@pytest.mark.parametrize(
    "instrumentor",
    # OpenInference's LangChain RETRIEVER span; OpenLLMetry's chromadb 0.62.4 `chroma.query`
    # span (db.query.result events) before its openai 0.62.4 span, in one trace; OpenLLMetry's
    # langchain 0.62.4 `vector_db_retrieve` span (documents in traceloop.entity.output).
    ["langchain", "openllmetry_chromadb", "openllmetry_langchain"],
)
def test_a_recorded_retriever_span_grounds_the_llm_span_after_it(
    instrumentor: str, mode: str
) -> None:
    documents: list[str] = []
    readings = []
    for span in load(f"{instrumentor}-retriever-{mode}"):  # in the order they ended
        role = span_role(span.attributes)
        if role == "retriever":
            documents += retrieved_documents(span.attributes, span.events)
        elif role == "llm":
            readings.append(read_case(span.attributes, span.events, retrieved=documents))
    assert documents == [DOCUMENT]
    [reading] = readings
    assert reading.contexts_source == semconv.CONTEXT_SOURCE_RETRIEVAL
    assert reading.case is not None and reading.case.contexts == [DOCUMENT]


def test_explicit_contexts_come_first_and_name_their_source() -> None:
    llm = next(s for s in load("openinference-grounded-plain") if span_role(s.attributes))
    attributes = {**llm.attributes, semconv.CONTEXTS: ("explicit doc",)}
    reading = read_case(attributes, retrieved=["retrieved doc"], options=PROMPT)
    assert reading.case is not None and reading.case.contexts == ["explicit doc"]
    assert reading.contexts_source == semconv.CONTEXT_SOURCE_EXPLICIT
    attributes[semconv.CONTEXTS_SOURCE] = semconv.CONTEXT_SOURCE_GROUNDING
    assert read_case(attributes).contexts_source == semconv.CONTEXT_SOURCE_GROUNDING


def test_retrieved_documents_come_before_template_mapping_and_prompt() -> None:
    attributes = {
        semconv.OPENINFERENCE_SPAN_KIND: "LLM",
        semconv.INPUT_VALUE: "q?",
        semconv.OUTPUT_VALUE: "an answer",
        semconv.LLM_PROMPT_TEMPLATE_VARIABLES: json.dumps({"context": "template doc"}),
        "app.docs": "mapped doc",
    }
    mapping = compile_mapping({"contexts": "app.docs"})
    options = ReadOptions(mapping=mapping, contexts_from_prompt=True)
    first = read_case(attributes, retrieved=["retrieved"], options=options)
    assert first.contexts_source == semconv.CONTEXT_SOURCE_RETRIEVAL
    second = read_case(attributes, options=options)
    assert second.contexts_source == semconv.CONTEXT_SOURCE_TEMPLATE
    assert second.case is not None and second.case.contexts == ["template doc"]
    del attributes[semconv.LLM_PROMPT_TEMPLATE_VARIABLES]
    third = read_case(attributes, options=options)
    assert third.contexts_source == semconv.CONTEXT_SOURCE_MAPPING
    assert third.case is not None and third.case.contexts == ["mapped doc"]


def test_a_declarative_mapping_reaches_into_json_values() -> None:
    attributes = {
        "app.request": json.dumps({"q": "Who?", "docs": [{"text": "A"}, {"text": "B"}]}),
        "app.reply": "Alice.",
    }
    mapping = compile_mapping(
        {"question": "app.request#q", "answer": "app.reply", "contexts": "app.request#docs.*.text"}
    )
    reading = read_case(attributes, options=ReadOptions(mapping=mapping))
    assert reading.case is not None
    assert (reading.case.input, reading.case.output, reading.case.contexts) == (
        "Who?",
        "Alice.",
        ["A", "B"],
    )
    assert reading.contexts_source == semconv.CONTEXT_SOURCE_MAPPING


def test_a_mapping_callable_that_raises_finds_nothing() -> None:
    def broken(attributes: Any) -> Any:
        raise RuntimeError("user bug")

    reading = read_case({semconv.OUTPUT_VALUE: "a"}, options=ReadOptions(mapping=broken))
    assert reading.skip_reason == semconv.SKIP_NO_CONTEXTS


@pytest.mark.parametrize("bad", [{"answer": 3}, {"unknown": "x"}, {"contexts": "#only.json"}, 42])
def test_a_bad_declarative_mapping_is_refused_with_a_clear_error(bad: Any) -> None:
    with pytest.raises(ValueError, match="span_mapping"):
        compile_mapping(bad)


def test_openllmetry_legacy_indexed_attributes() -> None:
    attributes = {
        semconv.OPENLLMETRY_REQUEST_TYPE: "chat",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "Doc: the sky is blue.",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": json.dumps([{"type": "text", "text": "Sky colour?"}]),
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "Blue.",
    }
    assert span_role(attributes) == "llm"
    reading = read_case(attributes, options=PROMPT)
    assert reading.case is not None
    assert (reading.case.input, reading.case.output) == ("Sky colour?", "Blue.")
    assert reading.case.contexts == ["Doc: the sky is blue."]


@pytest.mark.parametrize(
    "answers",
    [
        {
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "Blue.",
            "gen_ai.completion.1.role": "assistant",
            "gen_ai.completion.1.content": "Green.",
        },
        {
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "Blue.",
            "llm.output_messages.1.message.role": "assistant",
            "llm.output_messages.1.message.content": "Green.",
        },
    ],
)
def test_of_several_choices_the_first_is_the_answer(answers: dict[str, str]) -> None:
    attributes = {
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "Sky colour?",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "Sky colour?",
        semconv.CONTEXTS: ("The sky is blue.",),
        **answers,
    }
    reading = read_case(attributes)
    assert reading.case is not None
    assert reading.case.output == "Blue."


def test_genai_message_and_choice_events() -> None:
    events = [
        ("gen_ai.system.message", {"content": "Doc: the sky is blue."}),
        ("gen_ai.user.message", {"content": json.dumps([{"type": "text", "text": "Sky?"}])}),
        ("gen_ai.choice", {"index": 1, "message": json.dumps({"content": "Green."})}),
        ("gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": {"content": "Blue."}}),
    ]
    reading = read_case({semconv.GEN_AI_OPERATION_NAME: "chat"}, events, options=PROMPT)
    assert reading.case is not None, reading.skip_reason
    assert (reading.case.input, reading.case.output) == ("Sky?", "Blue.")
    assert reading.case.contexts == ["Doc: the sky is blue."]


def test_traceloop_entity_values_and_genai_system_instructions() -> None:
    reading = read_case(
        {
            semconv.TRACELOOP_ENTITY_INPUT: json.dumps({"inputs": "Sky colour?"}),
            semconv.TRACELOOP_ENTITY_OUTPUT: json.dumps({"outputs": "Blue."}),
            semconv.CONTEXTS: ("The sky is blue.",),
        }
    )
    assert reading.case is not None and reading.case.output == "Blue."
    genai = read_case(
        {
            semconv.GEN_AI_SYSTEM_INSTRUCTIONS: json.dumps([{"type": "text", "content": "Doc"}]),
            semconv.GEN_AI_INPUT_MESSAGES: json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": "Q?"}]}]
            ),
            semconv.GEN_AI_OUTPUT_MESSAGES: json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "A."}]}]
            ),
        },
        options=PROMPT,
    )
    assert genai.case is not None and genai.case.contexts == ["Doc"]


def test_openinference_content_parts() -> None:
    reading = read_case(
        {
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.contents.0.message_content.type": "text",
            "llm.input_messages.0.message.contents.0.message_content.text": "Q?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.contents.0.message_content.type": "text",
            "llm.output_messages.0.message.contents.0.message_content.text": "A.",
            semconv.CONTEXTS: ["doc"],
        }
    )
    assert reading.case is not None
    assert (reading.case.input, reading.case.output) == ("Q?", "A.")


def test_skip_reasons() -> None:
    assert read_case({semconv.INPUT_VALUE: "q"}).skip_reason == semconv.SKIP_NO_ANSWER
    assert read_case({}).skip_reason == semconv.SKIP_CAPTURE_OFF  # openai-v2 without opt-in
    hashed = {semconv.OUTPUT_LENGTH: 3, semconv.OUTPUT_SHA256: "ab"}
    assert read_case(hashed).skip_reason == semconv.SKIP_CAPTURE_OFF
    counted = {semconv.OUTPUT_VALUE: "a", semconv.CONTEXTS_COUNT: 2}
    assert read_case(counted).skip_reason == semconv.SKIP_CAPTURE_OFF
    tool_call = {
        semconv.GEN_AI_OUTPUT_MESSAGES: json.dumps(
            [{"role": "assistant", "parts": [{"type": "tool_call", "name": "f"}]}]
        )
    }
    assert read_case(tool_call).skip_reason == semconv.SKIP_TOOL_CALL
    marked = {semconv.OUTPUT_NOT_TEXT: "coroutine", semconv.CONTEXTS: ("c",)}
    assert read_case(marked).skip_reason == semconv.SKIP_NOT_TEXT
    body = {semconv.OUTPUT_VALUE: '{"unknown": 1}', semconv.OUTPUT_MIME_TYPE: "application/json"}
    assert read_case(body).skip_reason == semconv.SKIP_NOT_TEXT


GARBAGE: list[Any] = [
    "[" * 3000,
    "{" * 3000,
    '{"choices": ' * 3000,
    "x" * 2_000_000,
    "[" + "1," * 500_000 + "1]",
    42,
    3.5,
    True,
    (1, 2),
    ("a", None),
    b"bytes",
    None,
    "null",
    "[]",
    '{"choices": [null]}',
    '{"choices": [{"message": {"content": [{"type": "text", "text": 5}]}}]}',
    '{"generations": [[]]}',
    '{"generations": [[5]]}',
    '"just a string"',
]


@pytest.mark.parametrize("value", GARBAGE, ids=range(len(GARBAGE)))
@pytest.mark.parametrize(
    "key",
    [
        semconv.OUTPUT_VALUE,
        semconv.INPUT_VALUE,
        semconv.GEN_AI_OUTPUT_MESSAGES,
        semconv.GEN_AI_INPUT_MESSAGES,
        semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
        semconv.LLM_PROMPT_TEMPLATE_VARIABLES,
        semconv.CONTEXTS,
        "llm.output_messages.0.message.content",
        "gen_ai.completion.0.content",
        semconv.TRACELOOP_ENTITY_OUTPUT,
    ],
)
def test_garbage_gives_a_case_or_a_skip_reason_never_an_exception(key: str, value: Any) -> None:
    attributes = {semconv.OPENINFERENCE_SPAN_KIND: "LLM", key: value}
    mime = {semconv.OUTPUT_MIME_TYPE: "application/json", semconv.INPUT_MIME_TYPE: "x"}
    for extra in ({}, mime):
        reading = read_case({**attributes, **extra}, options=PROMPT)
        assert (reading.case is None) != (reading.skip_reason is None)
        assert reading.skip_reason in (None, *semconv.SKIP_REASONS)


@pytest.mark.parametrize("mode", ["plain", "stream"])
def test_a_recorded_openllmetry_legacy_span_reads_its_indexed_attributes(mode: str) -> None:
    """A real span of OpenLLMetry's last indexed-attribute openai release.

    opentelemetry-instrumentation-openai 0.54.0 writes gen_ai.prompt.N.* and
    gen_ai.completion.N.*; 0.55.0 moved to gen_ai.input/output.messages.
    Recorded with `--instrumentor openllmetry_legacy`.
    """
    [span] = load(f"openllmetry_legacy-grounded-{mode}")
    assert "gen_ai.prompt.1.content" in span.attributes
    assert semconv.GEN_AI_INPUT_MESSAGES not in span.attributes
    reading = read_case(span.attributes, span.events, options=PROMPT)
    assert reading.case is not None
    assert reading.case.input == QUESTION
    assert reading.case.output == ANSWERS["grounded"]
    assert reading.case.contexts == ["Answer only from this document:\n" + DOCUMENT]


@pytest.mark.parametrize(
    "attributes",
    [
        {"gen_ai.operation.name": {"kvlist": "from OTLP"}},
        {"llm.request.type": ["chat"]},
        {"db.system": {"name": "chroma"}},
    ],
)
def test_role_attributes_of_the_wrong_type_give_no_role(attributes: dict[str, object]) -> None:
    assert span_role(attributes) is None


@pytest.mark.parametrize("operation", ["completion", "acompletion"])
def test_litellms_own_operation_names_make_llm_spans(operation: str) -> None:
    """The operation litellm's OpenTelemetry callback writes is its function's name."""
    assert span_role({"gen_ai.operation.name": operation}) == "llm"
    assert span_role({"llm.request.type": operation}) == "llm"


def test_text_openinference_hid_is_neither_the_question_nor_evidence() -> None:
    hidden = semconv.OPENINFERENCE_REDACTED
    reading = read_case(
        {
            "openinference.span.kind": "LLM",
            "input.value": hidden,
            "llm.input_messages.0.message.role": "tool",
            "llm.input_messages.0.message.content": hidden,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "Paris.",
        }
    )
    assert reading.case is None and reading.skip_reason == semconv.SKIP_NO_CONTEXTS
    reading = read_case(
        {
            "openinference.span.kind": "LLM",
            "input.value": hidden,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "Paris.",
            "tracefact.contexts": ["Paris is the capital of France."],
        }
    )
    assert reading.case is not None and reading.case.input == ""


def test_genai_messages_sent_structured_are_read_as_their_json_is() -> None:
    """Over OTLP the semconv sends them as arrays and kvlists: decoded, tuples and dicts."""
    from tracefact.conventions.otlp import attributes as otlp_attributes

    def text(value: str) -> dict[str, Any]:
        return {"stringValue": value}

    def kvlist(**fields: Any) -> dict[str, Any]:
        values = [{"key": key, "value": value} for key, value in fields.items()]
        return {"kvlistValue": {"values": values}}

    def array(*values: Any) -> dict[str, Any]:
        return {"arrayValue": {"values": list(values)}}

    def message(role: str, content: str) -> dict[str, Any]:
        part = kvlist(type=text("text"), content=text(content))
        return kvlist(role=text(role), parts=array(part))

    attributes = otlp_attributes(
        [
            {"key": "gen_ai.operation.name", "value": text("chat")},
            {"key": "gen_ai.input.messages", "value": array(message("user", "Capital?"))},
            {"key": "gen_ai.output.messages", "value": array(message("assistant", "Paris."))},
        ]
    )
    reading = read_case(attributes, retrieved=["Paris is the capital of France."])
    assert reading.case is not None
    assert (reading.case.input, reading.case.output) == ("Capital?", "Paris.")


def test_a_tool_result_written_as_parts_is_evidence() -> None:
    """A tool message's result as text parts, as litellm's OpenTelemetry callback writes it."""
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Oslo?"}]},
        {"role": "tool", "parts": [{"type": "text", "content": "Rain, 14C"}], "tool_call_id": "c1"},
    ]
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": "Rain and 14C."}]}]
    reading = read_case(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(messages),
            "gen_ai.output.messages": json.dumps(answer),
        }
    )
    assert reading.case is not None and reading.case.contexts == ["Rain, 14C"]
    assert reading.contexts_source == semconv.CONTEXT_SOURCE_TOOL
