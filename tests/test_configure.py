"""configure(): providers, exporters, environment, and a real OTLP/HTTP round trip."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracefact
from tests.fakes.otlp import otlp_receiver

pytestmark = pytest.mark.usefixtures("fresh_globals")


@tracefact.llm(name="answer")
def answer(question: str) -> str:
    return "an answer"


def test_otlp_round_trip_to_a_real_receiver() -> None:
    with otlp_receiver() as receiver:
        tracefact.configure(
            service_name="support-bot",
            exporter="otlp",
            endpoint=receiver.endpoint,
            headers={"x-team": "search"},
        )
        answer("what is grounded?")
        assert tracefact.force_flush(10_000)
        receiver.wait_for(1)
        ((resource, span),) = receiver.spans()
    assert resource["service.name"] == "support-bot"
    assert span.name == "answer"
    attributes = {a.key: a.value.string_value for a in span.attributes}
    assert attributes["input.value"] == "what is grounded?"
    assert attributes["output.value"] == "an answer"
    assert attributes["openinference.span.kind"] == "LLM"
    assert receiver.headers[0]["x-team"] == "search"


def test_otlp_endpoint_from_standard_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("TRACEFACT_SERVICE_NAME", "from-env")
        tracefact.configure()
        answer("q")
        assert tracefact.force_flush(10_000)
        receiver.wait_for(1)
        ((resource, span),) = receiver.spans()
    assert resource["service.name"] == "from-env"
    assert span.name == "answer"


def test_adds_to_an_existing_global_provider_without_replacing_it() -> None:
    provider = TracerProvider()
    theirs = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(theirs))
    trace.set_tracer_provider(provider)
    ours = InMemorySpanExporter()

    assert tracefact.configure(exporter=ours) is provider
    assert trace.get_tracer_provider() is provider
    answer("q")
    tracefact.force_flush()
    assert [s.name for s in theirs.get_finished_spans()] == ["answer"]
    assert [s.name for s in ours.get_finished_spans()] == ["answer"]


def test_configure_twice_replaces_the_exporter_and_exports_once() -> None:
    first, second = InMemorySpanExporter(), InMemorySpanExporter()
    provider = tracefact.configure(exporter=first)
    answer("one")
    assert tracefact.configure(exporter=second) is provider
    answer("two")
    tracefact.force_flush()
    assert [s.attributes["input.value"] for s in first.get_finished_spans()] == ["one"]
    assert [s.attributes["input.value"] for s in second.get_finished_spans()] == ["two"]


def test_exporter_none_records_nothing_and_console_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    tracefact.configure(exporter="console")
    answer("printed question")
    tracefact.force_flush()
    assert "printed question" in capsys.readouterr().out
    tracefact.configure(exporter="none")
    answer("silent question")
    tracefact.force_flush()
    assert "silent question" not in capsys.readouterr().out


def test_invalid_settings_fail_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="exporter"):
        tracefact.configure(exporter="zipkin")
    monkeypatch.setenv("TRACEFACT_MAX_ATTRIBUTE_LENGTH", "-3")
    with pytest.raises(ValueError, match="max_attribute_length"):
        tracefact.configure()


def test_shutdown_then_spans_go_nowhere() -> None:
    exporter = InMemorySpanExporter()
    tracefact.configure(exporter=exporter)
    answer("before")
    tracefact.shutdown()
    answer("after")  # must not raise
    assert [s.attributes["input.value"] for s in exporter.get_finished_spans()] == ["before"]
