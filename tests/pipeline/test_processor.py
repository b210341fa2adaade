"""EvaluationProcessor behaviour, read back from the exporter behind it."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.trace import StatusCode

from tests.pipeline.helpers import Pipeline, ScriptedEvaluator, carriers, evaluated_copies
from tests.waiting import eventually
from tracefact import semconv
from tracefact._clock import ManualClock
from tracefact.evaluators.lexical import LexicalOverlap
from tracefact.pipeline import metrics
from tracefact.sampling import Never, RateLimit

STATUS = semconv.EVAL_STATUS


def data_points(reader: InMemoryMetricReader) -> dict[str, Any]:
    """Each metric's data points, by name."""
    return {
        metric.name: metric.data.data_points
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
    }


@pytest.fixture
def pipeline() -> Iterator[Pipeline]:
    p = Pipeline()
    yield p
    p.close()


def test_enriched_copy_carries_results_and_keeps_every_original_field(pipeline: Pipeline) -> None:
    original = pipeline.llm_span(output="hallucinated", question="who?")
    assert pipeline.flush()
    (copy,) = pipeline.exported()
    assert copy is not original
    for field in ("name", "context", "parent", "kind", "start_time", "end_time", "links"):
        assert getattr(copy, field) == getattr(original, field), field
    assert copy.resource is original.resource
    assert copy.instrumentation_scope == original.instrumentation_scope
    assert copy.status.status_code == original.status.status_code
    assert dict(original.attributes).items() <= dict(copy.attributes).items()
    assert copy.events[: len(original.events)] == original.events

    a = copy.attributes
    assert a[STATUS] == "ok"
    assert a["tracefact.eval.hallucination.label"] == "hallucinated"
    assert a["tracefact.eval.hallucination.score"] == 0.9
    assert a["tracefact.eval.hallucination.explanation"] == "scripted hallucinated"
    assert a["tracefact.eval.hallucination.evaluator"] == "scripted/hallucination"
    assert a["tracefact.eval.hallucination.unsupported"] == ("hallucinated",)
    assert a["tracefact.eval.sample_rate"] == 1.0
    assert a["tracefact.eval.latency_ms"] >= 0
    assert a["evaluations.0.evaluation.name"] == "hallucination"
    assert a["evaluations.0.evaluation.label"] == "hallucinated"
    assert a["evaluations.0.evaluation.score"] == 0.9
    assert a["evaluations.0.evaluation.annotator_kind"] == "CODE"
    event = copy.events[-1]
    assert event.name == "gen_ai.evaluation.result"
    assert event.attributes == {
        "gen_ai.evaluation.name": "hallucination",
        "gen_ai.evaluation.score.value": 0.9,
        "gen_ai.evaluation.score.label": "hallucinated",
        "gen_ai.evaluation.explanation": "scripted hallucinated",
    }


def test_span_mode_exports_original_then_a_linked_carrier_child() -> None:
    with Pipeline(attach="span") as p:
        original = p.llm_span(output="hallucinated")
        assert p.flush()
        exported = p.exported()
        assert exported[0] is original
        (carrier,) = carriers(exported)
        assert carrier.attributes[semconv.OPENINFERENCE_SPAN_KIND] == "EVALUATOR"
        assert len(carrier.links) == 1
        assert carrier.links[0].context == original.context
        assert carrier.parent == original.context
        assert carrier.context.trace_id == original.context.trace_id
        assert carrier.context.span_id != original.context.span_id
        assert carrier.attributes["tracefact.eval.hallucination.label"] == "hallucinated"
        assert carrier.attributes["evaluations.0.evaluation.label"] == "hallucinated"
        assert carrier.events[0].name == "gen_ai.evaluation.result"
        assert carrier.resource is original.resource


def test_non_llm_spans_pass_through_untouched(pipeline: Pipeline) -> None:
    with pipeline.tracer.start_as_current_span("http", attributes={"http.method": "GET"}):
        pass
    original = pipeline.originals.get_finished_spans()[0]
    assert pipeline.exported() == [original]
    assert STATUS not in original.attributes


@pytest.mark.parametrize(
    ("output", "contexts"), [(None, ["ctx"]), ("answer", None), ("  ", ["ctx"]), ("a", [])]
)
def test_missing_output_or_contexts_is_skipped(
    pipeline: Pipeline, output: str | None, contexts: list[str] | None
) -> None:
    pipeline.llm_span(output=output, contexts=contexts)
    assert pipeline.flush()
    (span,) = pipeline.exported()
    assert span.attributes[STATUS] == "skipped"
    assert pipeline.evaluators[0].calls == 0


def test_sampled_out_spans_are_marked_without_a_copy() -> None:
    with Pipeline(sampler=Never()) as p:
        original = p.llm_span()
        assert p.exported() == [original]
        assert original.attributes[STATUS] == "sampled_out"


def test_full_queue_exports_at_once_with_status_dropped() -> None:
    with Pipeline(queue_size=2, timeout_seconds=5, drain_seconds=0.1) as p:
        for _ in range(2):
            p.llm_span(output="hang")
        dropped = [p.llm_span(output="ok") for _ in range(3)]
        assert p.exported() == dropped
        assert {s.attributes[STATUS] for s in dropped} == {"dropped"}
    statuses = sorted(s.attributes[STATUS] for s in p.exported())
    assert statuses == ["dropped"] * 3 + ["shutdown"] * 2


def test_evaluator_past_its_deadline_gives_status_timeout() -> None:
    with Pipeline(timeout_seconds=0.05) as p:
        p.llm_span(output="hang")
        assert p.flush()
        (span,) = p.exported()
        assert span.attributes[STATUS] == "timeout"
        assert span.attributes["tracefact.eval.hallucination.status"] == "timeout"
        assert "0.05s" in span.attributes["tracefact.eval.error"]


def test_span_held_too_long_goes_out_with_timeout_and_result_follows_on_carrier() -> None:
    clock = ManualClock()
    # The evaluation's own deadline runs on real time: far enough that only the hold limit,
    # on the test's clock, can let the span go first, however loaded the machine.
    with Pipeline(max_hold_seconds=0.05, timeout_seconds=600, clock=clock) as p:
        original = p.llm_span(output="thread")  # judged once the gate opens
        clock.advance(0.06)  # past the hold limit: the watchdog lets the span go
        assert eventually(p.exported)
        (held,) = p.exported()
        assert held.attributes[STATUS] == "timeout"
        assert "max_hold_seconds" in held.attributes["tracefact.eval.error"]
        p.evaluators[0].gate.set()
        assert p.flush()
        _, carrier = p.exported()
        assert carriers([carrier]) == [carrier]
        assert carrier.links[0].context == original.context
        assert carrier.attributes[STATUS] == "ok"
        assert carrier.attributes["tracefact.eval.hallucination.label"] == "factual"


def test_transient_errors_are_retried_with_backoff() -> None:
    with Pipeline(max_retries=2) as p:
        p.llm_span(output="flaky:2")
        assert p.flush()
        (span,) = p.exported()
        assert span.attributes[STATUS] == "ok"
        assert p.evaluators[0].calls == 3


def test_retries_give_up_with_status_error() -> None:
    with Pipeline(max_retries=1) as p:
        p.llm_span(output="flaky:5", question="a")
        p.llm_span(output="error", question="b")
        assert p.flush()
        by_question = {s.attributes["input.value"]: s for s in p.exported()}
        assert by_question["a"].attributes[STATUS] == "error"
        assert "503" in by_question["a"].attributes["tracefact.eval.error"]
        assert by_question["b"].attributes[STATUS] == "error"
        assert p.evaluators[0].calls == 2 + 1  # flaky: first try + one retry; 400: no retry


def test_rate_limit_errors_are_retried() -> None:
    with Pipeline(max_retries=2) as p:
        p.llm_span(output="ratelimit")
        assert p.flush()
        assert p.exported()[0].attributes[STATUS] == "error"
        assert p.evaluators[0].calls == 3


def test_an_evaluator_returning_garbage_is_an_error(pipeline: Pipeline) -> None:
    pipeline.llm_span(output="garbage")
    assert pipeline.flush()
    span = pipeline.exported()[0]
    assert span.attributes[STATUS] == "error"
    assert "not EvalResult" in span.attributes["tracefact.eval.error"]


def test_several_evaluators_each_under_their_own_prefix() -> None:
    with Pipeline([ScriptedEvaluator("judge"), LexicalOverlap(name="lexical")]) as p:
        p.llm_span(output="the context", contexts=["the context"])
        assert p.flush()
        a = p.exported()[0].attributes
        assert a["tracefact.eval.judge.label"] == "factual"
        assert a["tracefact.eval.lexical.label"] == "factual"
        assert {a["evaluations.0.evaluation.name"], a["evaluations.1.evaluation.name"]} == {
            "judge",
            "lexical",
        }
        assert len(p.exported()[0].events) == 1 + 2


def test_one_failing_evaluator_of_two_marks_the_span_error_and_keeps_the_other() -> None:
    with Pipeline([ScriptedEvaluator("judge"), ScriptedEvaluator("second")], max_retries=0) as p:
        p.llm_span(output="error")
        assert p.flush()
        a = p.exported()[0].attributes
        assert a[STATUS] == "error"
        assert a["tracefact.eval.judge.status"] == "error"


def test_invalid_configuration_is_rejected() -> None:
    with pytest.raises(ValueError, match="unique"):
        Pipeline([ScriptedEvaluator("x"), ScriptedEvaluator("x")])
    with pytest.raises(ValueError, match="at least one evaluator"):
        Pipeline([])
    with pytest.raises(ValueError, match="attach"):
        Pipeline(attach="sideways")


def test_shutdown_drains_then_marks_leftovers_and_later_spans() -> None:
    p = Pipeline(drain_seconds=2.0, timeout_seconds=30)
    p.llm_span(output="hang", question="hung")
    p.llm_span(output="ok", question="quick")
    p.close()
    by_question = {s.attributes["input.value"]: s.attributes[STATUS] for s in p.exported()}
    assert by_question == {"hung": "shutdown", "quick": "ok"}


def test_spans_ending_while_shutdown_drains_get_status_shutdown() -> None:
    p = Pipeline(drain_seconds=0.5)
    p.llm_span(output="hang", question="hung")
    closing = threading.Thread(target=p.processor.shutdown)
    closing.start()
    assert eventually(lambda: p.processor.closed)  # shutdown is now draining
    p.llm_span(output="ok", question="late")
    closing.join()
    by_question = {s.attributes["input.value"]: s.attributes[STATUS] for s in p.exported()}
    assert by_question == {"late": "shutdown", "hung": "shutdown"}


def test_force_flush_times_out_on_a_hanging_evaluator() -> None:
    with Pipeline(timeout_seconds=30, drain_seconds=0.05) as p:
        p.llm_span(output="hang")
        assert p.flush(0.1) is False


def test_sample_rate_of_a_rate_limiter_goes_on_the_span() -> None:
    with Pipeline(sampler=RateLimit(per_second=0.001, burst=1)) as p:
        first, second = p.llm_span(), p.llm_span()
        assert p.flush()
        assert second.attributes[STATUS] == "sampled_out"
        evaluated = [s for s in p.exported() if s.context == first.context]
        assert evaluated[0].attributes[STATUS] == "ok"
        assert evaluated[0].attributes["tracefact.eval.sample_rate"] == 1.0


def test_metrics_account_for_every_llm_span() -> None:
    reader = InMemoryMetricReader()
    p = Pipeline(
        [ScriptedEvaluator(cost=0.002)],
        meter_provider=MeterProvider(metric_readers=[reader]),
        queue_size=1,
        drain_seconds=0.05,
    )
    p.llm_span(output="hang")
    p.llm_span(output="ok")  # dropped: the only slot is taken
    p.close()
    p2_spans = p.exported()
    points = data_points(reader)
    by_status = {dp.attributes["status"]: dp.value for dp in points["tracefact.eval.spans"]}
    assert by_status == {"dropped": 1, "shutdown": 1}
    assert sum(by_status.values()) == len(p2_spans)
    assert points["tracefact.eval.dropped"][0].value == 1
    assert "tracefact.eval.queue.depth" in points


def test_spans_sampled_out_on_many_threads_are_counted_exactly_while_metrics_are_read() -> None:
    """The sampled-out count takes no lock: no span may be lost, nor counted twice."""
    reader = InMemoryMetricReader()
    p = Pipeline(sampler=Never(), meter_provider=MeterProvider(metric_readers=[reader]))
    threads, per_thread = 4, 200
    reading = threading.Event()

    def read_all_along() -> None:
        while not reading.is_set():
            data_points(reader)

    def sampled_out_spans() -> None:
        for _ in range(per_thread):
            p.llm_span()

    readers = [threading.Thread(target=read_all_along)]
    writers = [threading.Thread(target=sampled_out_spans) for _ in range(threads)]
    for thread in readers + writers:
        thread.start()
    for thread in writers:
        thread.join()
    reading.set()
    readers[0].join()
    points = data_points(reader)
    by_status = {dp.attributes["status"]: dp.value for dp in points["tracefact.eval.spans"]}
    assert by_status == {"sampled_out": threads * per_thread}
    assert all(s.attributes[STATUS] == "sampled_out" for s in p.exported())
    p.close()


def test_evaluation_metrics_record_label_score_cost() -> None:
    reader = InMemoryMetricReader()
    p = Pipeline(
        [ScriptedEvaluator(cost=0.002)], meter_provider=MeterProvider(metric_readers=[reader])
    )
    p.llm_span(output="hallucinated")
    p.llm_span(output="ok")
    assert p.flush()
    p.close()
    points = data_points(reader)
    labels = {dp.attributes["label"]: dp.value for dp in points["tracefact.evaluations"]}
    assert labels == {"hallucinated": 1, "factual": 1}
    assert points["tracefact.eval.cost"][0].value == pytest.approx(0.004)
    assert points["tracefact.eval.score"][0].count == 2


@pytest.mark.parametrize("queued", [1, metrics.MAX_QUEUED_EVALUATIONS])
def test_evaluation_metrics_reach_every_reader_once(
    queued: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outcomes are recorded as a reader collects, or once `queued` of them wait.

    Each reader sees each evaluation once, whichever reader collects first.
    """
    monkeypatch.setattr(metrics, "MAX_QUEUED_EVALUATIONS", queued)
    first, second = InMemoryMetricReader(), InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[first, second])
    p = Pipeline([ScriptedEvaluator()], meter_provider=provider)
    p.llm_span(output="hallucinated")
    p.llm_span(output="ok")
    assert p.flush()
    assert data_points(first)["tracefact.eval.score"][0].count == 2
    p.llm_span(output="ok")
    assert p.flush()
    p.close()
    for reader in (second, first):
        points = data_points(reader)
        labels = {dp.attributes["label"]: dp.value for dp in points["tracefact.evaluations"]}
        assert labels == {"hallucinated": 1, "factual": 2}
        assert points["tracefact.eval.score"][0].count == 3
        assert points["tracefact.eval.duration"][0].count == 3


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_gets_working_workers() -> None:
    with Pipeline() as p:
        p.llm_span(output="ok", question="parent")
        assert p.flush()
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: evaluate one span, report its status through the pipe
            code = 1
            try:
                p.llm_span(output="hallucinated", question="child")
                p.flush(5)
                statuses = [s.attributes[STATUS] for s in p.exported()[1:]]
                os.write(write_end, ",".join(statuses).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
        assert os.read(read_end, 1000).decode() == "ok"
        os.close(read_end)


def test_exception_status_of_the_original_span_is_preserved(pipeline: Pipeline) -> None:
    with (
        pytest.raises(RuntimeError),
        pipeline.tracer.start_as_current_span(
            "llm", attributes={semconv.OPENINFERENCE_SPAN_KIND: "LLM"}
        ) as span,
    ):
        span.set_attribute(semconv.OUTPUT_VALUE, "partial")
        span.set_attribute(semconv.CONTEXTS, ["ctx"])
        raise RuntimeError("stream broke")
    assert pipeline.flush()
    (copy,) = evaluated_copies(pipeline.exported())
    assert copy.status.status_code == StatusCode.ERROR
    assert copy.attributes[STATUS] == "ok"
