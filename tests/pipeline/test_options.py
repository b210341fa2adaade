"""`PipelineOptions`: one validated options object, built by `configure`, taken by the processor."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.pipeline.helpers import Pipeline, ScriptedEvaluator
from tracefact.config import Settings
from tracefact.pipeline import EvaluationProcessor, PipelineOptions


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("queue_size", 0),
        ("concurrency", 0),
        ("timeout_seconds", 0),
        ("max_retries", -1),
        ("max_hold_seconds", -1.0),
        ("drain_seconds", -0.5),
        ("attach", "sideways"),
        ("queue_size", "many"),
    ],
)
def test_a_bad_value_is_rejected_naming_its_field(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        PipelineOptions(**{field: value})
    with pytest.raises(ValueError, match=field):
        Pipeline(**{field: value})


def test_an_unknown_option_is_rejected_by_name() -> None:
    with pytest.raises(ValueError, match="queue_sise"):
        Pipeline(queue_sise=8)


def test_options_are_frozen() -> None:
    options = PipelineOptions()
    with pytest.raises(ValueError, match="frozen"):
        options.queue_size = 2  # type: ignore[misc]


def test_processor_takes_an_options_object_and_keywords_override_fields() -> None:
    options = PipelineOptions(queue_size=3, attach="span")
    processor = EvaluationProcessor(
        SimpleSpanProcessor(InMemorySpanExporter()), [ScriptedEvaluator()], options, concurrency=2
    )
    try:
        assert processor.options == PipelineOptions(queue_size=3, attach="span", concurrency=2)
    finally:
        processor.shutdown()


def test_settings_build_the_options_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEFACT_QUEUE_SIZE", "7")
    monkeypatch.setenv("TRACEFACT_DRAIN_SECONDS", "0.5")
    options = Settings(max_retries=0).pipeline_options()
    assert options == PipelineOptions(queue_size=7, drain_seconds=0.5, max_retries=0)
