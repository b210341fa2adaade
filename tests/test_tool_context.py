"""`@tracefact.tool`: its result grounds the later LLM spans of its trace, and only those."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import tracefact
from tests.conftest import Spans
from tracefact import semconv
from tracefact.evaluators.lexical import LexicalOverlap

FACT = "The Eiffel Tower is 330 metres tall."
LABEL = semconv.eval_attribute("hallucination", "label")


@pytest.fixture
def judged(spans: Spans) -> Spans:
    spans.reconfigure(evaluators=[LexicalOverlap()])
    return spans


@tracefact.tool
def landmark(name: str) -> dict[str, Any]:
    return {"name": name, "height": "330 metres"}


@tracefact.tool(name="height")
async def height(name: str) -> str:
    return FACT


@tracefact.tool
def streamed(name: str) -> Iterator[str]:
    yield "The Eiffel Tower "
    yield "is 330 metres tall."


@tracefact.tool()
async def streamed_async(name: str) -> AsyncIterator[str]:
    yield "The Eiffel Tower is "
    yield "330 metres tall."


@tracefact.tool
def broken(name: str) -> str:
    raise LookupError(f"no landmark called {name}")


@tracefact.tool
def echo(text: str) -> str:
    return text


@tracefact.llm(name="answer")
def answer(question: str) -> str:
    return "The Eiffel Tower is 330 metres tall."


def test_a_tool_span_in_every_convention(judged: Spans) -> None:
    landmark("Eiffel Tower")
    attributes = judged.one("landmark").attributes
    assert attributes[semconv.OPENINFERENCE_SPAN_KIND] == "TOOL"
    assert attributes[semconv.GEN_AI_OPERATION_NAME] == "execute_tool"
    assert attributes[semconv.GEN_AI_TOOL_NAME] == attributes[semconv.TOOL_NAME] == "landmark"
    assert attributes[semconv.INPUT_VALUE] == "Eiffel Tower"
    assert '"height": "330 metres"' in attributes[semconv.OUTPUT_VALUE]
    assert not any(key.startswith("tracefact.eval") for key in attributes)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: landmark("Eiffel Tower"), "landmark"),
        (lambda: asyncio.run(height("Eiffel Tower")), "height"),
        (lambda: "".join(streamed("Eiffel Tower")), "streamed"),
        (lambda: asyncio.run(_drain(streamed_async("Eiffel Tower"))), "streamed_async"),
    ],
    ids=["sync", "async", "generator", "async-generator"],
)
def test_a_later_llm_span_of_the_trace_is_judged_on_the_tool_result(
    judged: Spans, call: Any, name: str
) -> None:
    with tracefact.span("agent"):
        call()
        answer("How tall is the Eiffel Tower?")
    attributes = judged.one("answer").attributes
    assert attributes[semconv.EVAL_STATUS] == "ok"
    assert attributes[semconv.CONTEXTS_SOURCE] == semconv.CONTEXT_SOURCE_TOOL
    assert attributes[semconv.CONTEXTS_TOOL_CALLS] == (name,)
    [context] = attributes[semconv.CONTEXTS]
    assert "330 metres" in context
    assert attributes[LABEL] == "factual"


async def _drain(stream: AsyncIterator[str]) -> str:
    return "".join([chunk async for chunk in stream])


def test_a_tool_that_raised_is_not_evidence(judged: Spans) -> None:
    with tracefact.span("agent"):
        with pytest.raises(LookupError):
            broken("Atlantis")
        answer("How tall is the Eiffel Tower?")
    attributes = judged.one("answer").attributes
    assert attributes[semconv.EVAL_SKIP_REASON] == semconv.SKIP_NO_CONTEXTS


def test_a_tool_that_returned_nothing_is_not_evidence(judged: Spans) -> None:
    @tracefact.tool
    def lookup(name: str) -> None:
        return None

    with tracefact.span("agent"):
        lookup("Atlantis")
        answer("How tall is the Eiffel Tower?")
    attributes = judged.one("answer").attributes
    assert attributes[semconv.EVAL_SKIP_REASON] == semconv.SKIP_NO_CONTEXTS


def test_an_excluded_tool_is_not_evidence(judged: Spans) -> None:
    judged.reconfigure(evaluators=[LexicalOverlap()], exclude_tools=["echo"])
    with tracefact.span("agent"):
        echo(FACT)
        height("Eiffel Tower").close()  # a coroutine never awaited: no span at all
        answer("How tall is the Eiffel Tower?")
    attributes = judged.one("answer").attributes
    assert attributes[semconv.EVAL_SKIP_REASON] == semconv.SKIP_NO_CONTEXTS


def test_tools_and_retrievers_of_one_trace_are_used_together(judged: Spans) -> None:
    @tracefact.retriever(name="search")
    def search(query: str) -> list[str]:
        return ["It stands on the Champ de Mars."]

    with tracefact.span("agent"):
        search("Eiffel Tower")
        asyncio.run(height("Eiffel Tower"))
        answer("How tall is the Eiffel Tower?")
    attributes = judged.one("answer").attributes
    assert attributes[semconv.CONTEXTS_SOURCE] == semconv.CONTEXT_SOURCE_TOOL_RETRIEVAL
    assert attributes[semconv.CONTEXTS] == ("It stands on the Champ de Mars.", FACT)


def test_a_tool_of_another_trace_or_after_the_answer_is_not_evidence(judged: Spans) -> None:
    asyncio.run(height("Eiffel Tower"))  # its own trace
    with tracefact.span("agent"):
        answer("How tall is the Eiffel Tower?")
        asyncio.run(height("Eiffel Tower"))  # after the answer
    attributes = judged.one("answer").attributes
    assert attributes[semconv.EVAL_SKIP_REASON] == semconv.SKIP_NO_CONTEXTS


def test_configure_refuses_exclude_tools_that_are_not_names(fresh_globals: None) -> None:
    with pytest.raises(TypeError, match="exclude_tools"):
        tracefact.configure(exporter="none", exclude_tools="echo")
