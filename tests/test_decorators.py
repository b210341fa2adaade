"""Decorators on every call style, read back from the exporter."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Iterator

import pytest
from opentelemetry import trace
from opentelemetry.trace import StatusCode

import tracefact
from tests.conftest import Spans

INPUT = "input.value"
OUTPUT = "output.value"
KIND = "openinference.span.kind"


def test_bare_decorator_records_input_output_and_kind(spans: Spans) -> None:
    @tracefact.llm
    def answer(question: str) -> str:
        return "Paris"

    assert answer("capital of France?") == "Paris"
    span = spans.one("test_bare_decorator_records_input_output_and_kind.<locals>.answer")
    assert span.attributes[KIND] == "LLM"
    assert span.attributes[INPUT] == "capital of France?"
    assert span.attributes[OUTPUT] == "Paris"
    assert span.attributes["gen_ai.operation.name"] == "chat"
    assert span.kind == trace.SpanKind.CLIENT


def test_options_name_model_and_argument_overrides(spans: Spans) -> None:
    @tracefact.llm(name="answer", model="gpt-4o-mini", input="q", contexts="docs")
    def answer(q: str, docs: list[str], temperature: float = 0.0) -> str:
        return "42"

    answer("the answer?", ["The answer is 42."], temperature=0.2)
    span = spans.one("answer")
    assert span.attributes[INPUT] == "the answer?"
    assert span.attributes["tracefact.contexts"] == ("The answer is 42.",)
    assert span.attributes["llm.model_name"] == "gpt-4o-mini"
    assert span.attributes["gen_ai.request.model"] == "gpt-4o-mini"


def test_model_taken_from_call_argument(spans: Spans) -> None:
    @tracefact.llm(name="call")
    def call(prompt: str, model: str) -> str:
        return "ok"

    call("hi", model="claude-x")
    assert spans.one("call").attributes["gen_ai.request.model"] == "claude-x"


def test_several_unnamed_arguments_become_json_input(spans: Spans) -> None:
    @tracefact.chain(name="pipeline")
    def pipeline(a: int, b: dict[str, int]) -> dict[str, int]:
        return {"sum": a + b["x"]}

    pipeline(1, {"x": 2})
    span = spans.one("pipeline")
    assert span.attributes[INPUT] == '{"a": 1, "b": {"x": 2}}'
    assert span.attributes["input.mime_type"] == "application/json"
    assert span.attributes[OUTPUT] == '{"sum": 3}'
    assert span.attributes[KIND] == "CHAIN"


def test_override_naming_a_missing_parameter_fails_at_decoration() -> None:
    with pytest.raises(ValueError, match="no parameter 'nope'"):

        @tracefact.llm(input="nope")
        def answer(question: str) -> str:
            return ""


async def test_async_function(spans: Spans) -> None:
    @tracefact.llm(name="aanswer")
    async def aanswer(question: str) -> str:
        await asyncio.sleep(0)
        return "async answer"

    assert await aanswer("q?") == "async answer"
    assert spans.one("aanswer").attributes[OUTPUT] == "async answer"


def test_methods_skip_self(spans: Spans) -> None:
    class Bot:
        prefix = "A: "

        @tracefact.llm(name="Bot.answer")
        def answer(self, question: str) -> str:
            return self.prefix + question

    assert Bot().answer("hi") == "A: hi"
    assert spans.one("Bot.answer").attributes[INPUT] == "hi"


def test_exception_propagates_unchanged_and_is_recorded(spans: Spans) -> None:
    class Boom(Exception):
        pass

    error = Boom("provider down")

    @tracefact.llm(name="failing")
    def failing(question: str) -> str:
        raise error

    with pytest.raises(Boom) as caught:
        failing("q")
    assert caught.value is error
    span = spans.one("failing")
    assert span.status.status_code == StatusCode.ERROR
    assert "provider down" in (span.status.description or "")
    assert span.events[0].name == "exception"


def test_an_exception_that_cannot_be_printed_still_fails_the_span(spans: Spans) -> None:
    """The SDK's record_exception prints the exception itself: a hostile __str__ breaks it."""

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    @tracefact.llm(name="failing")
    def failing(question: str) -> str:
        raise Unprintable()

    with pytest.raises(Unprintable):
        failing("q")
    span = spans.one("failing")
    assert span.status.status_code == StatusCode.ERROR
    assert "Unprintable" in (span.status.description or "")
    [event] = span.events
    assert event.name == "exception"
    assert event.attributes is not None and "Unprintable" in str(event.attributes.values())
    # No answer because the call failed, whatever capture was: not `capture_off`.
    assert span.attributes["tracefact.eval.skip_reason"] == "no_answer"


def test_callable_objects_and_partials_can_be_decorated(spans: Spans) -> None:
    class Answerer:
        def __call__(self, question: str) -> str:
            return "an answer"

    def respond(question: str, contexts: list[str]) -> str:
        return "a reply"

    assert tracefact.llm(Answerer())("q") == "an answer"
    assert tracefact.llm(functools.partial(respond, contexts=["c"]))("q") == "a reply"
    names = {s.name.rsplit(".", 1)[-1] for s in spans.all()}  # qualified by this test
    assert names == {"Answerer", "respond"}


def test_generator_output_joined_when_stream_ends(spans: Spans) -> None:
    @tracefact.llm(name="stream")
    def stream(question: str) -> Iterator[str]:
        yield "Hello, "
        yield "world"

    assert list(stream("greet")) == ["Hello, ", "world"]
    span = spans.one("stream")
    assert span.attributes[OUTPUT] == "Hello, world"
    assert span.status.status_code == StatusCode.UNSET


def test_generator_span_is_current_only_inside_the_generator(spans: Spans) -> None:
    seen: list[str] = []

    @tracefact.llm(name="stream")
    def stream(question: str) -> Iterator[str]:
        seen.append(trace.get_current_span().get_span_context().span_id)
        yield "x"

    gen = stream("q")
    next(gen)
    assert trace.get_current_span() is trace.INVALID_SPAN
    list(gen)
    assert seen == [spans.one("stream").context.span_id]


def test_abandoned_stream_keeps_partial_output_and_error(spans: Spans) -> None:
    @tracefact.llm(name="stream")
    def stream(question: str) -> Iterator[str]:
        yield "partial "
        yield "never read"

    gen = stream("q")
    assert next(gen) == "partial "
    gen.close()
    span = spans.one("stream")
    assert span.attributes[OUTPUT] == "partial "
    assert span.status.status_code == StatusCode.ERROR
    assert "abandoned" in (span.status.description or "")


def test_stream_that_raises_keeps_partial_output(spans: Spans) -> None:
    @tracefact.llm(name="stream")
    def stream(question: str) -> Iterator[str]:
        yield "so far"
        raise RuntimeError("connection reset")

    with pytest.raises(RuntimeError, match="connection reset"):
        list(stream("q"))
    span = spans.one("stream")
    assert span.attributes[OUTPUT] == "so far"
    assert span.status.status_code == StatusCode.ERROR


async def test_async_generator(spans: Spans) -> None:
    @tracefact.llm(name="astream")
    async def astream(question: str) -> AsyncIterator[str]:
        for part in ("a", "b", "c"):
            await asyncio.sleep(0)
            yield part

    assert [p async for p in astream("q")] == ["a", "b", "c"]
    assert spans.one("astream").attributes[OUTPUT] == "abc"


async def test_abandoned_async_generator(spans: Spans) -> None:
    @tracefact.llm(name="astream")
    async def astream(question: str) -> AsyncIterator[str]:
        yield "first"
        yield "second"

    gen = astream("q")
    assert await gen.__anext__() == "first"
    await gen.aclose()
    span = spans.one("astream")
    assert span.attributes[OUTPUT] == "first"
    assert span.status.status_code == StatusCode.ERROR


def test_generator_return_value_is_preserved(spans: Spans) -> None:
    @tracefact.chain(name="gen")
    def gen() -> Iterator[int]:
        yield 1
        return "done"  # type: ignore[misc]

    def outer() -> Iterator[int]:
        result = yield from gen()
        assert result == "done"

    assert list(outer()) == [1]
    assert spans.one("gen").attributes[OUTPUT] == "[1]"


def test_nested_spans_share_the_trace(spans: Spans) -> None:
    @tracefact.llm(name="inner")
    def inner(question: str) -> str:
        return "x"

    @tracefact.chain(name="outer")
    def outer(question: str) -> str:
        return inner(question)

    outer("q")
    parent, child = spans.one("outer"), spans.one("inner")
    assert child.parent is not None and child.parent.span_id == parent.context.span_id
    assert child.context.trace_id == parent.context.trace_id


def test_span_context_manager_records_parts(spans: Spans) -> None:
    with tracefact.span("answer", kind="llm", model="m") as s:
        s.record(
            input="q?",
            contexts=["ctx one", {"page_content": "ctx two"}],
            output="a.",
            usage={"prompt_tokens": 12, "completion_tokens": 3},
        )
    span = spans.one("answer")
    assert span.attributes["tracefact.contexts"] == ("ctx one", "ctx two")
    assert span.attributes["gen_ai.usage.input_tokens"] == 12
    assert span.attributes["gen_ai.usage.output_tokens"] == 3
    assert span.attributes["llm.token_count.total"] == 15
    assert span.attributes["llm.model_name"] == "m"


async def test_span_async_context_manager_records_exception(spans: Spans) -> None:
    with pytest.raises(KeyError):
        async with tracefact.span("step") as s:
            s.record(input="x")
            raise KeyError("missing")
    span = spans.one("step")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[KIND] == "CHAIN"


def test_span_rejects_unknown_kind() -> None:
    with pytest.raises(ValueError, match="kind must be one of"):
        tracefact.span("x", kind="agent")  # type: ignore[arg-type]


def test_generator_send_and_throw_reach_the_wrapped_generator(spans: Spans) -> None:
    received: list[object] = []

    @tracefact.llm(name="chat")
    def chat(question: str) -> Iterator[str]:
        while True:
            try:
                received.append((yield "ready"))
            except KeyError:
                yield "handled"

    stream = chat("q")
    assert next(stream) == "ready"
    assert stream.send("hello") == "ready"
    assert stream.throw(KeyError("x")) == "handled"
    stream.close()
    assert received == ["hello"]
    span = spans.one("chat")
    assert span.attributes[OUTPUT] == "readyreadyhandled"


def test_async_generator_asend_and_athrow_reach_the_wrapped_generator(spans: Spans) -> None:
    received: list[object] = []

    @tracefact.llm(name="chat")
    async def chat(question: str) -> AsyncIterator[str]:
        while True:
            try:
                received.append((yield "ready"))
            except KeyError:
                yield "handled"

    async def main() -> list[str]:
        stream = chat("q")
        out = [await stream.asend(None), await stream.asend("hello")]
        out.append(await stream.athrow(KeyError("x")))
        await stream.aclose()
        return out

    assert asyncio.run(main()) == ["ready", "ready", "handled"]
    assert received == ["hello"]
    assert spans.one("chat").attributes[OUTPUT] == "readyreadyhandled"


def test_generator_error_thrown_in_and_not_handled_fails_the_span(spans: Spans) -> None:
    @tracefact.llm(name="chat")
    def chat(question: str) -> Iterator[str]:
        yield "a"
        yield "b"

    stream = chat("q")
    next(stream)
    with pytest.raises(ValueError, match="stop"):
        stream.throw(ValueError("stop"))
    span = spans.one("chat")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[OUTPUT] == "a"
