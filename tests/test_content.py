"""Content controls: secrets, redaction, truncation, hashing, hostile values."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

import tracefact
from tests.conftest import Spans, reset_global_tracer_provider


def test_secret_arguments_are_never_recorded(spans: Spans) -> None:
    @tracefact.chain(name="call")
    def call(body: str, api_key: str, max_tokens: int, headers: dict[str, str]) -> str:
        return "ok"

    call("hi", api_key="sk-live-123", max_tokens=5, headers={"Authorization": "Bearer xyz"})
    recorded = spans.one("call").attributes["input.value"]
    assert isinstance(recorded, str)
    assert "sk-live-123" not in recorded and "xyz" not in recorded
    assert '"max_tokens": 5' in recorded
    assert '"Authorization": "[REDACTED]"' in recorded


def test_truncation_keeps_a_visible_marker(spans: Spans) -> None:
    spans.reconfigure(max_attribute_length=100)

    @tracefact.llm(name="long")
    def long(question: str) -> str:
        return "y" * 1000

    long("x" * 50)
    span = spans.one("long")
    assert span.attributes["input.value"] == "x" * 50
    assert span.attributes["output.value"] == "y" * 100 + "…[truncated 900 chars]"


def test_redact_is_applied_before_recording(spans: Spans) -> None:
    spans.reconfigure(redact=lambda text: text.replace("Alice", "***"))

    @tracefact.llm(name="answer")
    def answer(question: str, contexts: list[str]) -> str:
        return "Alice lives in Paris"

    answer("Where does Alice live?", ["Alice moved to Paris."])
    span = spans.one("answer")
    assert span.attributes["input.value"] == "Where does *** live?"
    assert span.attributes["output.value"] == "*** lives in Paris"
    assert span.attributes["tracefact.contexts"] == ("*** moved to Paris.",)


def test_failing_redactor_hides_the_value(spans: Spans) -> None:
    def broken(text: str) -> str:
        raise RuntimeError("bug")

    spans.reconfigure(redact=broken)

    @tracefact.llm(name="answer")
    def answer(question: str) -> str:
        return "secret answer"

    assert answer("q") == "secret answer"
    assert spans.one("answer").attributes["output.value"] == "[REDACTED]"


def test_capture_content_false_keeps_only_sizes_and_hashes(spans: Spans) -> None:
    spans.reconfigure(capture_content=False)

    @tracefact.llm(name="answer")
    def answer(question: str, contexts: list[str]) -> str:
        return "private answer"

    answer("private question", ["private context"])
    attributes = spans.one("answer").attributes
    assert "input.value" not in attributes and "output.value" not in attributes
    assert "tracefact.contexts" not in attributes
    assert attributes["tracefact.output.length"] == len("private answer")
    assert attributes["tracefact.output.sha256"] == hashlib.sha256(b"private answer").hexdigest()
    assert attributes["tracefact.input.length"] == len("private question")
    assert attributes["tracefact.contexts.count"] == 1


def test_capture_content_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    monkeypatch.setenv("TRACEFACT_CAPTURE_CONTENT", "false")
    reset_global_tracer_provider()
    exporter = InMemorySpanExporter()
    tracefact.configure(exporter=exporter)
    try:

        @tracefact.llm(name="answer")
        def answer(question: str) -> str:
            return "hidden"

        answer("q")
        tracefact.force_flush()
        (span,) = exporter.get_finished_spans()
        assert "output.value" not in span.attributes
        assert span.attributes["tracefact.output.length"] == 6
    finally:
        tracefact.shutdown()
        reset_global_tracer_provider()


class Hostile:
    def __repr__(self) -> str:
        raise RuntimeError("repr explodes")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"\x00\xff binary", "<9 bytes>"),
        (Hostile(), "<unrepresentable Hostile>"),
        ({"nested": [1, 2.5, None, True]}, '{"nested": [1, 2.5, null, true]}'),
    ],
)
def test_any_value_is_serialised_safely(spans: Spans, value: Any, expected: str) -> None:
    @tracefact.chain(name="echo")
    def echo(x: Any) -> Any:
        return x

    assert echo(value) is value
    assert spans.one("echo").attributes["output.value"] == expected


def test_cycles_and_huge_collections_do_not_crash(spans: Spans) -> None:
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)

    @tracefact.chain(name="echo")
    def echo(x: Any) -> Any:
        return x

    echo(cyclic)
    echo(list(range(100_000)))
    outputs = [s.attributes["output.value"] for s in spans.all()]
    assert outputs[0] == '[1, "<cycle>"]'
    assert isinstance(outputs[1], str) and "99000 more items" in outputs[1]
