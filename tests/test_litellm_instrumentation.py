"""instrument_litellm(): plain litellm calls become LLM spans (mock_response, no network)."""

from __future__ import annotations

import gc
import sys
import types
from collections.abc import Iterator

import pytest
from opentelemetry import context as otel_context
from opentelemetry.trace import StatusCode

import tracefact
from tests.conftest import Spans

litellm = pytest.importorskip("litellm")

MESSAGES = [
    {"role": "system", "content": "Answer from the context."},
    {"role": "user", "content": "Who wrote Python?"},
]


@pytest.fixture
def instrumented(spans: Spans) -> Iterator[Spans]:
    tracefact.instrument_litellm()
    yield spans
    tracefact.uninstrument_litellm()


def test_completion_becomes_an_llm_span(instrumented: Spans) -> None:
    response = litellm.completion(
        model="gpt-4o-mini", messages=MESSAGES, mock_response="Guido van Rossum."
    )
    assert response.choices[0].message.content == "Guido van Rossum."
    (span,) = instrumented.all()
    assert span.attributes["openinference.span.kind"] == "LLM"
    assert span.attributes["input.value"] == "Who wrote Python?"
    assert span.attributes["output.value"] == "Guido van Rossum."
    assert span.attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert span.attributes["gen_ai.usage.input_tokens"] > 0
    assert span.attributes["gen_ai.usage.output_tokens"] > 0


async def test_acompletion(instrumented: Spans) -> None:
    await litellm.acompletion(model="gpt-4o-mini", messages=MESSAGES, mock_response="async")
    (span,) = instrumented.all()
    assert span.attributes["output.value"] == "async"


def test_streaming_output_is_joined(instrumented: Spans) -> None:
    stream = litellm.completion(
        model="gpt-4o-mini", messages=MESSAGES, mock_response="streamed answer", stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream)
    assert text == "streamed answer"
    (span,) = instrumented.all()
    assert span.attributes["output.value"] == "streamed answer"
    assert span.status.status_code == StatusCode.UNSET


async def test_async_streaming(instrumented: Spans) -> None:
    stream = await litellm.acompletion(
        model="gpt-4o-mini", messages=MESSAGES, mock_response="async stream", stream=True
    )
    parts = [chunk.choices[0].delta.content or "" async for chunk in stream]
    assert "".join(parts) == "async stream"
    (span,) = instrumented.all()
    assert span.attributes["output.value"] == "async stream"


def test_abandoned_stream_ends_span_with_error(instrumented: Spans) -> None:
    stream = litellm.completion(
        model="gpt-4o-mini", messages=MESSAGES, mock_response="a b c d e f", stream=True
    )
    next(iter(stream))
    del stream
    gc.collect()
    (span,) = instrumented.all()
    assert span.status.status_code == StatusCode.ERROR
    assert "abandoned" in (span.status.description or "")


def test_provider_error_propagates_and_is_recorded(instrumented: Spans) -> None:
    with pytest.raises(litellm.exceptions.RateLimitError):
        litellm.completion(
            model="gpt-4o-mini",
            messages=MESSAGES,
            mock_response=litellm.exceptions.RateLimitError(
                "slow down", llm_provider="openai", model="gpt-4o-mini"
            ),
        )
    (span,) = instrumented.all()
    assert span.status.status_code == StatusCode.ERROR


def test_instrumenting_twice_makes_one_span_and_uninstrument_restores(spans: Spans) -> None:
    original = litellm.completion
    tracefact.instrument_litellm()
    tracefact.instrument_litellm()
    litellm.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response="once")
    tracefact.uninstrument_litellm()
    assert litellm.completion is original
    litellm.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response="untraced")
    assert [s.attributes["output.value"] for s in spans.all()] == ["once"]


def test_suppressed_instrumentation_makes_no_span(instrumented: Spans) -> None:
    token = otel_context.attach(
        otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True)
    )
    try:
        litellm.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response="judge call")
    finally:
        otel_context.detach(token)
    assert instrumented.all() == []


def test_api_key_never_reaches_the_span(instrumented: Spans) -> None:
    litellm.completion(
        model="gpt-4o-mini", messages=MESSAGES, mock_response="ok", api_key="sk-very-secret"
    )
    (span,) = instrumented.all()
    assert all("sk-very-secret" not in str(value) for value in span.attributes.values())


def test_functions_imported_before_instrumenting_are_traced_too(
    spans: Spans, caplog: pytest.LogCaptureFixture
) -> None:
    app = types.ModuleType("early_app")
    exec("from litellm import completion, acompletion", app.__dict__)
    original = app.completion
    sys.modules["early_app"] = app
    try:
        with caplog.at_level("INFO", logger="tracefact"):
            tracefact.instrument_litellm()
        assert "early_app.completion" in caplog.text and "early_app.acompletion" in caplog.text
        app.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response="early")
        (span,) = spans.all()
        assert span.attributes["output.value"] == "early"
        tracefact.uninstrument_litellm()
        assert app.completion is original
    finally:
        tracefact.uninstrument_litellm()
        del sys.modules["early_app"]
