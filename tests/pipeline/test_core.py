"""The pipeline both hosts share: span records in, verdicts out, through a host's `apply`.

The host here is a list: what a host would apply to its own span type is read back as
the verdicts it was given.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.pipeline.helpers import ScriptedEvaluator
from tracefact import semconv
from tracefact.pipeline import Pipeline, PipelineOptions, Record, Verdict
from tracefact.pipeline.reading import SpanReader
from tracefact.sampling import Always, Never, Sampler


class Host:
    """Keeps every verdict with the span it was for."""

    def __init__(self) -> None:
        self.applied: list[tuple[str, Verdict]] = []
        self._lock = threading.Lock()

    def apply(self, span: str, verdict: Verdict) -> None:
        with self._lock:
            self.applied.append((span, verdict))

    def verdicts(self, span: str) -> list[Verdict]:
        with self._lock:
            return [verdict for name, verdict in self.applied if name == span]


def record(span_id: int, output: str | None = "ok", contexts: bool = True) -> Record:
    attributes: dict[str, Any] = {
        semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_LLM,
        semconv.INPUT_VALUE: "q",
    }
    if output is not None:
        attributes[semconv.OUTPUT_VALUE] = output
    if contexts:
        attributes[semconv.CONTEXTS] = ("the context",)
    return Record(0xC0FFEE, span_id, None, f"llm-{span_id}", attributes)


@pytest.fixture
def host() -> Host:
    return Host()


def pipeline_of(
    host: Host,
    sampler: Sampler | None = None,
    evaluator: ScriptedEvaluator | None = None,
    **options: Any,
) -> Pipeline[str]:
    return Pipeline(
        host.apply,
        [evaluator or ScriptedEvaluator()],
        PipelineOptions(**options),
        sampler=sampler or Always(),
        reader=SpanReader(),
    )


@pytest.fixture
def running() -> Iterator[list[Pipeline[str]]]:
    """Pipelines a test builds; drained at its end."""
    built: list[Pipeline[str]] = []
    yield built
    for pipeline in built:
        pipeline.drain()


def test_a_record_in_gives_one_final_verdict_with_what_to_add(
    host: Host, running: list[Pipeline[str]]
) -> None:
    pipeline = pipeline_of(host)
    running.append(pipeline)
    pipeline.evaluate(record(1, output="hallucinated"), "span-1")
    assert pipeline.wait_idle(10)
    [verdict] = host.verdicts("span-1")
    assert (verdict.status, verdict.final, verdict.carrier) == ("ok", True, False)
    assert verdict.sample_rate == 1.0
    assert verdict.attributes[semconv.EVAL_STATUS] == "ok"
    assert verdict.attributes[semconv.EVAL_SAMPLE_RATE] == 1.0
    assert verdict.attributes[semconv.CONTEXTS_SOURCE] == "explicit"
    assert verdict.attributes[semconv.eval_attribute("hallucination", "label")] == "hallucinated"
    [event] = verdict.events
    assert event.name == semconv.GEN_AI_EVALUATION_EVENT
    [result] = verdict.results
    assert result.label == "hallucinated"
    assert verdict.span_results().evaluators["hallucination"].hallucinated is True
    assert pipeline.admission.in_flight == 0


def test_admission_refuses_before_the_case_is_read(
    host: Host, running: list[Pipeline[str]]
) -> None:
    sampled_out = pipeline_of(host, Never())
    running.append(sampled_out)
    sampled_out.evaluate(record(1), "span-1")
    [verdict] = host.verdicts("span-1")
    assert verdict.status == "sampled_out"
    assert dict(verdict.attributes) == {semconv.EVAL_STATUS: "sampled_out"}

    evaluator = ScriptedEvaluator()
    full = pipeline_of(host, evaluator=evaluator, queue_size=1)
    running.append(full)
    full.evaluate(record(2, output="thread"), "span-2")  # holds the one place in flight
    full.evaluate(record(3, output=None, contexts=False), "span-3")  # unreadable: not read
    [dropped] = host.verdicts("span-3")
    assert dropped.status == "dropped"
    assert dict(dropped.attributes) == {
        semconv.EVAL_STATUS: "dropped",
        semconv.EVAL_SAMPLE_RATE: 1.0,
    }
    assert full.admission.in_flight == 1
    evaluator.gate.set()
    assert full.wait_idle(10)
    assert full.admission.in_flight == 0


def test_attach_span_releases_the_span_then_sends_its_verdict_on_a_carrier(
    host: Host, running: list[Pipeline[str]]
) -> None:
    pipeline = pipeline_of(host, attach="span")
    running.append(pipeline)
    pipeline.evaluate(record(1), "span-1")
    assert pipeline.wait_idle(10)
    released, judged = host.verdicts("span-1")
    assert (released.status, released.final, dict(released.attributes)) == (None, False, {})
    assert (judged.status, judged.final, judged.carrier) == ("ok", True, True)


def test_a_span_held_past_its_limit_leaves_with_timeout_and_its_verdict_follows(
    host: Host, running: list[Pipeline[str]]
) -> None:
    pipeline = pipeline_of(host, max_hold_seconds=0.05)
    running.append(pipeline)
    pipeline.evaluate(record(1, output="slow:0.5"), "span-1")
    assert pipeline.wait_idle(10)
    released, judged = host.verdicts("span-1")
    assert (released.status, released.final, released.carrier) == ("timeout", False, False)
    assert released.attributes[semconv.EVAL_SAMPLE_RATE] == 1.0
    assert (judged.status, judged.final, judged.carrier) == ("ok", True, True)
    assert pipeline.admission.in_flight == 0


def test_what_drain_cuts_off_ends_with_shutdown(host: Host) -> None:
    evaluator = ScriptedEvaluator()
    pipeline = pipeline_of(host, evaluator=evaluator, drain_seconds=0.1)
    pipeline.evaluate(record(1, output="thread"), "span-1")
    try:
        assert pipeline.drain()
        assert not pipeline.drain()  # once
    finally:
        evaluator.gate.set()
    [verdict] = host.verdicts("span-1")
    assert verdict.status == "shutdown"
    pipeline.evaluate(record(2), "span-2")  # after shutdown: not evaluated, still delivered
    [after] = host.verdicts("span-2")
    assert after.status == "shutdown"
    assert pipeline.admission.in_flight == 0
