"""Content finished off the application's thread where tracefact owns every processor.

What leaves is what finishing on the app thread gave: scrubbed, cut, valid UTF-8, with
the same `tracefact.scrubbed` paths; the value recorded is the one the call returned.
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracefact
from tests.conftest import Spans
from tracefact import semconv

KEY = "sk-" + "a1B2c3D4" * 4


class Seen(SpanProcessor):
    """What a processor of the app sees as spans end (on the app thread)."""

    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


def _answer() -> Any:
    @tracefact.llm(name="answer", model="m")
    def answer(question: str, contexts: list[str]) -> str:
        return f"use {KEY}\udcff"

    return answer


def test_deferred_content_leaves_scrubbed_with_the_same_paths(spans: Spans) -> None:
    _answer()(f"is {KEY} valid?", ["fine", f"key={KEY}"])
    span = spans.one("answer")
    attributes = span.attributes or {}
    assert attributes["input.value"] == "is [SCRUBBED] valid?"
    assert attributes[semconv.CONTEXTS] == ("fine", "key=[SCRUBBED]")
    assert attributes["output.value"] == "use [SCRUBBED]?"  # the lone surrogate replaced
    assert attributes[semconv.SCRUBBED] == ("input.value", "tracefact.contexts.1", "output.value")
    assert semconv.CONTENT_PENDING not in attributes


def test_the_app_threads_never_see_content_pending_once_another_processor_is_there(
    spans: Spans,
) -> None:
    seen = Seen()
    provider = tracefact.configure(exporter=InMemorySpanExporter())
    provider.add_span_processor(seen)
    _answer()(f"is {KEY} valid?", ["fine"])
    [span] = seen.ended
    attributes = span.attributes or {}
    assert semconv.CONTENT_PENDING not in attributes
    assert attributes["input.value"] == "is [SCRUBBED] valid?"
    assert attributes["output.value"] == "use [SCRUBBED]?"


def test_the_console_exporter_prints_finished_content(
    spans: Spans, capsys: pytest.CaptureFixture[str]
) -> None:
    """It prints on the app thread, behind tracefact's processor: nothing is deferred for it."""
    tracefact.configure(exporter="console", evaluators=[])
    _answer()(f"is {KEY} valid?", ["fine"])
    assert tracefact.force_flush(10_000)
    printed = capsys.readouterr().out
    assert "is [SCRUBBED] valid?" in printed
    assert KEY not in printed and semconv.CONTENT_PENDING not in printed


def test_the_value_recorded_is_the_one_the_call_returned(spans: Spans) -> None:
    state: dict[str, Any] = {"answer": "1889"}

    @tracefact.llm(name="answer")
    def answer(question: str) -> dict[str, Any]:
        return state

    answer("when?")
    state["answer"] = f"changed after the call, {KEY}"
    recorded = (spans.one("answer").attributes or {})["output.value"]
    assert recorded == '{"answer": "1889"}'


def test_a_long_text_is_cut_on_the_app_thread_with_its_full_length_counted(spans: Spans) -> None:
    spans.reconfigure(max_attribute_length=100)

    @tracefact.llm(name="long")
    def long(question: str) -> str:
        return "y" * 5000 + KEY

    long("x" * 100)
    attributes = spans.one("long").attributes or {}
    assert attributes["input.value"] == "x" * 100
    assert attributes["output.value"] == "y" * 100 + f"…[truncated {4900 + len(KEY)} chars]"
