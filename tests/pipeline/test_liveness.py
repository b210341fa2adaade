"""Every job ends, and the time limits hold.

Whatever the input, the evaluator or the processor behind does, each span leaves with
a status and its slot is freed.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import pytest
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.pipeline.helpers import Pipeline, ScriptedEvaluator, carriers, evaluated_copies
from tests.waiting import eventually
from tracefact import semconv
from tracefact._otel import is_suppressed
from tracefact.evaluators.base import EvalCase, EvalResult, EvaluatorDescription

STATUS = semconv.EVAL_STATUS


def status_of(p: Pipeline, span: ReadableSpan) -> str | None:
    for out in evaluated_copies(p.exported()):
        if out.context.span_id == span.context.span_id:
            return out.attributes.get(STATUS)
    return None


def result_status(p: Pipeline, span: ReadableSpan) -> str | None:
    """The evaluation's status: on the carrier when the span went out before its result."""
    for carrier in carriers(p.exported()):
        if carrier.links[0].context.span_id == span.context.span_id:
            return carrier.attributes.get(STATUS)
    return status_of(p, span)


def test_a_question_the_reader_cannot_parse_is_judged_without_it_and_frees_its_slot() -> None:
    """A deeply nested JSON question reads as no question: the answer is still judged.

    Such a question is a RecursionError for a naive reader; the one slot is free again.
    """
    with Pipeline(queue_size=1) as p:
        nested = p.llm_span(question="[" * 3000)
        assert p.flush()
        assert status_of(p, nested) == semconv.STATUS_OK
        after = p.llm_span(question="plain")  # the one slot is free again
        assert p.flush()
        assert status_of(p, after) == semconv.STATUS_OK


class RejectsCarriers(SimpleSpanProcessor):
    """A processor behind tracefact that raises on every carrier span."""

    def on_end(self, span: ReadableSpan) -> None:
        if span.attributes.get(semconv.OPENINFERENCE_SPAN_KIND) == semconv.KIND_EVALUATOR:
            raise RuntimeError("downstream rejects carriers")
        super().on_end(span)


@pytest.mark.parametrize("attach", ["span", "enrich"])
def test_a_downstream_processor_raising_on_the_carrier_frees_the_slot(attach: str) -> None:
    evaluator = ScriptedEvaluator()
    p = Pipeline([evaluator], attach=attach, queue_size=1, max_hold_seconds=0.05)
    p.processor.downstream = RejectsCarriers(p.exporter)
    try:
        first = p.llm_span(output="slow:0.3")  # enrich: held too long, result on a carrier
        assert p.flush()
        second = p.llm_span(output="ok", question="again")
        assert p.flush()
        exported = {s.context.span_id for s in evaluated_copies(p.exported())}
        assert exported == {first.context.span_id, second.context.span_id}
        assert evaluator.calls == 2  # the second span got the slot
        assert carriers(p.exported()) == []
    finally:
        p.close()


@pytest.mark.parametrize(
    "exception", ["SystemExit", "KeyboardInterrupt", "GeneratorExit", "CancelledError"]
)
def test_an_evaluator_raising_a_base_exception_gives_error_and_the_next_call_works(
    exception: str,
) -> None:
    with Pipeline(queue_size=4) as p:
        bad = p.llm_span(output=f"raise:{exception}")
        assert p.flush()
        assert status_of(p, bad) == semconv.STATUS_ERROR
        good = p.llm_span(output="ok", question="next")
        assert p.flush()
        assert status_of(p, good) == semconv.STATUS_OK


def test_an_evaluator_blocking_the_event_loop_cannot_hold_spans_past_their_limits() -> None:
    evaluator = ScriptedEvaluator()
    p = Pipeline([evaluator], queue_size=2, timeout_seconds=0.2, max_hold_seconds=0.1)
    try:
        stuck = p.llm_span(output="block")
        assert eventually(lambda: status_of(p, stuck) == semconv.STATUS_TIMEOUT)
        # The stuck loop is replaced: its slot is freed and later spans are evaluated.
        later = p.llm_span(output="ok", question="later")
        assert eventually(lambda: result_status(p, later) == semconv.STATUS_OK)
        assert p.flush()
        assert not evaluator.gate.is_set()  # all of it while the evaluator still blocks
    finally:
        evaluator.gate.set()
        p.close()
    assert len(evaluated_copies(p.exported())) == 2


def test_a_span_given_a_status_while_open_frees_the_slot_it_reserved() -> None:
    with Pipeline(queue_size=1) as p:
        with p.tracer.start_as_current_span(
            "upstream", attributes={semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_LLM}
        ) as span:  # sampled at start: it holds the only slot
            span.set_attribute(semconv.EVAL_STATUS, semconv.STATUS_OK)  # judged elsewhere
        later = p.llm_span(output="ok", question="later")
        assert p.flush()
        assert status_of(p, later) == semconv.STATUS_OK  # not dropped for want of a slot


@pytest.mark.parametrize("concurrency", [1, 16])
def test_an_evaluator_swallowing_cancellation_still_frees_its_slot(concurrency: int) -> None:
    evaluator = ScriptedEvaluator()
    p = Pipeline(
        [evaluator],
        queue_size=1,
        concurrency=concurrency,
        timeout_seconds=0.1,
        max_hold_seconds=5.0,
    )
    try:
        swallower = p.llm_span(output="swallow")
        assert eventually(lambda: status_of(p, swallower) == semconv.STATUS_TIMEOUT)
        assert p.flush()
        later = p.llm_span(output="ok", question="later")
        assert p.flush()
        assert status_of(p, later) == semconv.STATUS_OK
        assert not evaluator.gate.is_set()
    finally:
        evaluator.gate.set()
        p.close()


def test_a_job_waiting_on_io_is_not_held_back_by_jobs_that_hold_the_loop() -> None:
    """Jobs that each hold the loop let the others run between them.

    One whose reply has come resumes then, not after all the jobs queued behind it.
    """
    with Pipeline(queue_size=300, timeout_seconds=10.0) as p:
        waiting = p.llm_span(output="slow:0.05", question="waits on its reply")
        busy = [p.llm_span(output="busy:0.01", question=f"q{i}") for i in range(200)]
        assert p.flush(30.0)
        assert {status_of(p, span) for span in [waiting, *busy]} == {semconv.STATUS_OK}
        [judged] = [s for s in evaluated_copies(p.exported()) if s.context == waiting.context]
        # Resumed only once the 200 jobs behind it ran, it would have taken 2 s.
        assert judged.attributes[semconv.EVAL_LATENCY_MS] < 1000


class LeavesItsContextAttached:
    """An evaluator that attaches a context of its own and never detaches it."""

    name = "hallucination"

    def __init__(self) -> None:
        self.suppressed: list[bool] = []

    def describe(self) -> EvaluatorDescription:
        return EvaluatorDescription(name=self.name, evaluator="leaky")

    async def evaluate(self, case: EvalCase) -> EvalResult:
        self.suppressed.append(is_suppressed())
        otel_context.attach(otel_context.Context())  # no suppression, never detached
        return EvalResult(name=self.name, label="factual", score=0.1, evaluator="leaky")


def test_a_context_one_evaluation_leaves_attached_never_reaches_the_next() -> None:
    """Evaluations run one after another in one task: each starts suppressed all the same."""
    evaluator = LeavesItsContextAttached()
    with Pipeline([evaluator], concurrency=1) as p:
        spans = [p.llm_span(output="ok", question=f"q{i}") for i in range(3)]
        assert p.flush()
        assert [status_of(p, span) for span in spans] == [semconv.STATUS_OK] * 3
    assert evaluator.suppressed == [True, True, True]


def run_script(body: str) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter, so that what happens at its exit can be observed."""
    preamble = """
        import asyncio, sys
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
        from opentelemetry.sdk.trace.export import SpanExportResult
        from tests.pipeline.helpers import ScriptedEvaluator
        from tracefact import semconv
        from tracefact.pipeline import EvaluationProcessor

        class Printer(SpanExporter):
            def export(self, spans):
                for span in spans:
                    print("status", span.attributes.get(semconv.EVAL_STATUS), flush=True)
                return SpanExportResult.SUCCESS
    """
    script = textwrap.dedent(preamble) + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )


def test_an_evaluator_hanging_in_a_thread_does_not_keep_the_process_alive() -> None:
    done = run_script(
        """
        evaluator = ScriptedEvaluator()
        processor = EvaluationProcessor(
            SimpleSpanProcessor(Printer()), [evaluator], timeout_seconds=0.1,
            drain_seconds=0.1,
        )
        provider = TracerProvider()
        provider.add_span_processor(processor)
        attributes = {
            semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_LLM,
            semconv.OUTPUT_VALUE: "thread",
            semconv.CONTEXTS: ["c"],
        }
        provider.get_tracer("t").start_span("llm", attributes=attributes).end()
        processor.force_flush(5000)
        provider.shutdown()
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["status", "timeout"]


def test_spans_queued_at_exit_without_shutdown_end_shutdown_not_error() -> None:
    done = run_script(
        """
        class InExecutor(ScriptedEvaluator):
            async def evaluate(self, case):
                await asyncio.sleep(0.05)
                await asyncio.get_running_loop().run_in_executor(None, lambda: None)
                return await super().evaluate(case)

        provider = TracerProvider()  # shuts its processors down at exit
        processor = EvaluationProcessor(
            SimpleSpanProcessor(Printer()), [InExecutor()], max_hold_seconds=30,
        )
        provider.add_span_processor(processor)
        attributes = {
            semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_LLM,
            semconv.OUTPUT_VALUE: "slow:0.2",
            semconv.CONTEXTS: ["c"],
        }
        for _ in range(20):
            provider.get_tracer("t").start_span("llm", attributes=attributes).end()
        """
    )
    assert done.returncode == 0, done.stderr
    statuses = done.stdout.split()[1::2]
    assert len(statuses) == 20
    assert set(statuses) <= {semconv.STATUS_OK, semconv.STATUS_SHUTDOWN}, statuses


class ExitsFromACallback(ScriptedEvaluator):
    """Schedules `sys.exit` on the evaluation loop, outside any task tracefact runs."""

    async def evaluate(self, case: EvalCase) -> EvalResult:
        if case.output == "exit":
            asyncio.get_running_loop().call_soon(sys.exit)
        return await super().evaluate(case)


def test_system_exit_out_of_a_loop_callback_does_not_stop_evaluation() -> None:
    with Pipeline([ExitsFromACallback()]) as p:
        first = p.llm_span(output="exit")
        assert p.flush()
        later = p.llm_span(output="ok", question="later")
        assert p.flush()
        assert status_of(p, first) == semconv.STATUS_OK
        assert status_of(p, later) == semconv.STATUS_OK
