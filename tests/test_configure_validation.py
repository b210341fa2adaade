"""configure() refuses wrong arguments at the call, by name; a failing sampler costs no span."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import metrics
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from opentelemetry.util._once import Once

import tracefact
from tests.conftest import Spans, reset_global_tracer_provider
from tests.fakes.otlp import otlp_receiver
from tracefact import semconv
from tracefact.evaluators.lexical import LexicalOverlap
from tracefact.sampling import Decision, Rule, Sampler, SpanInfo
from tracefact.scrubbing import ScrubbingOptions


@pytest.fixture(autouse=True)
def fresh_globals() -> Iterator[None]:
    reset_global_tracer_provider()
    yield
    tracefact.shutdown()
    reset_global_tracer_provider()
    global_meter_provider(None)


@pytest.mark.parametrize(
    ("argument", "value", "error"),
    [
        ("sampler", "always", TypeError),
        ("evaluators", ["local"], TypeError),
        ("evaluators", "local", TypeError),
        ("evaluators", [object()], TypeError),
        ("exporter", 42, TypeError),
        ("exporter", "otpl", ValueError),
        ("exporter", ["console", 3.5], TypeError),
        ("queue_size", -1, ValueError),
        ("queue_size", 0, ValueError),
        ("queue_size", "10", TypeError),
        ("concurrency", True, TypeError),
        ("max_attribute_length", 4, ValueError),
        ("max_retries", -1, ValueError),
        ("timeout_seconds", 0, ValueError),
        ("timeout_seconds", float("nan"), ValueError),
        ("max_hold_seconds", "60", TypeError),
        ("redact", "[redacted]", TypeError),
        ("capture_content", "no", TypeError),
        ("attach", "child", ValueError),
        ("headers", {"x-team": 1}, TypeError),
        ("service_name", 7, TypeError),
        ("sinks", [object()], TypeError),
        ("scrubbing", "on", TypeError),
        ("scrubbing", ScrubbingOptions(extra_patterns=["(unclosed"]), ValueError),
        ("tracer_provider", object(), TypeError),
        ("monitor", {"max_groups": 3}, TypeError),
        ("evaluation", "fast", TypeError),
        ("drain_seconds", -1, ValueError),
        ("documents_max_traces", 0, ValueError),
        ("monitor_group_by", [""], ValueError),
    ],
)
def test_wrong_arguments_fail_at_the_call_naming_the_argument(
    argument: str, value: Any, error: type[Exception]
) -> None:
    with pytest.raises(error, match=argument):
        tracefact.configure(**{"exporter": "none", argument: value})


def global_meter_provider(provider: MeterProvider | None) -> None:
    """OpenTelemetry sets the global meter provider once; the sampler's counter uses it."""
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()
    metrics_internal._METER_PROVIDER = None
    if provider is not None:
        metrics.set_meter_provider(provider)


def sampler_errors(reader: InMemoryMetricReader) -> float:
    """`tracefact.sampler.errors` as the global meter provider's reader saw it."""
    data = reader.get_metrics_data()
    assert data is not None
    return sum(
        point.value
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == semconv.METRIC_SAMPLER_ERRORS
        for point in metric.data.data_points
        if isinstance(point, NumberDataPoint)
    )


class Exploding(Sampler):
    def decide(self, span: SpanInfo) -> Decision:
        raise KeyError("missing attribute")


@pytest.mark.parametrize(
    "sampler",
    [Exploding(), Rule(lambda span: span.attributes["tenant"] == "vip", then=Exploding())],
)
def test_a_sampler_that_raises_counts_as_not_sampled(spans: Spans, sampler: Sampler) -> None:
    reader = InMemoryMetricReader()
    global_meter_provider(MeterProvider(metric_readers=[reader]))
    spans.reconfigure(evaluators=[LexicalOverlap()], sampler=sampler)

    with tracefact.span("answer", kind="llm") as s:
        s.record(input="q", contexts=["ctx"], output="answer")

    @tracefact.llm(name="decorated")
    def decorated(question: str, contexts: list[str]) -> str:
        return "answer"

    assert decorated("q", ["ctx"]) == "answer"
    assert spans.one("answer").attributes[semconv.EVAL_STATUS] == semconv.STATUS_SAMPLED_OUT
    assert spans.one("decorated").attributes[semconv.EVAL_STATUS] == semconv.STATUS_SAMPLED_OUT
    assert sampler_errors(reader) == 2


class FailsToSettle(Sampler):
    """Samples every span, and raises when a decision comes back."""

    def decide(self, span: SpanInfo) -> Decision:
        return Decision(True, 1.0)

    def settle(self, decision: Decision, usd: float | None) -> None:
        raise RuntimeError("settle failed")


@pytest.mark.parametrize("attach", ["span", "enrich"])
def test_a_sampler_that_fails_to_settle_costs_no_span_and_no_exception(
    spans: Spans, attach: str
) -> None:
    """`settle` runs on the application's thread too (as a span ends, or when it is refused)."""
    reader = InMemoryMetricReader()
    global_meter_provider(MeterProvider(metric_readers=[reader]))
    spans.reconfigure(evaluators=[LexicalOverlap()], sampler=FailsToSettle(), attach=attach)

    @tracefact.llm(name="nothing")  # read as it ends, on the app thread: skipped, settled
    def nothing(question: str) -> None:
        return None

    @tracefact.llm(name="answer")
    def answer(question: str, contexts: list[str]) -> str:
        return "Paris is the capital of France."

    assert nothing("q") is None
    assert answer("capital?", ["Paris is the capital of France."]) == (
        "Paris is the capital of France."
    )
    tracefact.force_flush()
    assert spans.one("nothing").attributes[semconv.EVAL_STATUS] == semconv.STATUS_SKIPPED
    evaluated = [
        s for s in spans.all() if s.attributes.get(semconv.eval_attribute("hallucination", "label"))
    ]
    assert evaluated, "the sampled span was evaluated"
    assert sampler_errors(reader) == 2


def test_lone_surrogates_reach_a_real_otlp_receiver() -> None:
    with otlp_receiver() as receiver:
        tracefact.configure(
            exporter="otlp", endpoint=receiver.endpoint, evaluators=[LexicalOverlap()]
        )

        @tracefact.llm(name="answer")
        def answer(question: str, contexts: list[str]) -> str:
            return "Paris \ud800 is the capital."

        answer("capital \udfff?", ["Paris is the capital of France."])
        assert tracefact.force_flush(10_000)
        receiver.wait_for(1)
        ((_, span),) = receiver.spans()
    attributes = {a.key: a.value for a in span.attributes}
    assert attributes[semconv.OUTPUT_VALUE].string_value == "Paris ? is the capital."
    assert attributes[semconv.INPUT_VALUE].string_value == "capital ??"
    explanation = semconv.eval_attribute("hallucination", "explanation")
    assert attributes[explanation].string_value
