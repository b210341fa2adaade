"""`EvaluationProcessor`: evaluates sampled LLM spans off the application's threads.

Wraps the downstream processor (usually a BatchSpanProcessor). The invariant: every
span that enters leaves exactly once; an LLM span leaves enriched with results or
with an explicit `tracefact.eval.status` saying why not.

Where work happens:
- `on_start` (application thread): sampling decision; a sampled span reserves one of
  `queue_size` slots, so a full pipeline marks the span `dropped` while it is still
  open, with no copy and no waiting.
- `on_end` (application thread): hands the ended span to the worker (a deque append).
- worker thread (asyncio): runs the evaluators, then exports the enriched copy, or a
  carrier span when the original already left (`attach="span"`, or held too long),
  and hands each result to the result sinks, which deliver it on their own threads.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanProcessor

from tracefact import semconv
from tracefact.conventions import Reading, span_role
from tracefact.evaluators.base import EvalCase, EvalResult, Evaluator
from tracefact.pipeline.enrich import carrier_span, copy_with, outcome_attributes, outcome_events
from tracefact.pipeline.metrics import PipelineMetrics
from tracefact.pipeline.reading import SpanReader, plain_attributes
from tracefact.pipeline.run import RetryPolicy, run_evaluator
from tracefact.pipeline.worker import Worker
from tracefact.pipeline.wrapper import WrapperSpanProcessor
from tracefact.sampling import Always, Sampler, SpanInfo
from tracefact.sinks.base import EvaluatedSpan, ResultSink

logger = logging.getLogger("tracefact")

Attach = Literal["enrich", "span"]
HELD_TOO_LONG = (
    "evaluation still running after max_hold_seconds; its result follows on a carrier span"
)


class _Job:
    """One sampled span on its way through evaluation."""

    __slots__ = ("case", "done", "ended", "exported", "found", "sample_rate", "span", "timer")

    def __init__(
        self, span: ReadableSpan, reading: Reading, sample_rate: float, exported: bool
    ) -> None:
        self.span = span
        assert reading.case is not None, "only spans with a case are evaluated"
        self.case: EvalCase = reading.case
        self.found = _found_attributes(reading)
        """Where the contexts came from, and the contexts when the span lacks them."""
        self.sample_rate = sample_rate
        self.ended = time.monotonic()
        self.exported = exported
        """The span (original or a copy) has gone downstream; results need a carrier."""
        self.done = False
        self.timer: asyncio.TimerHandle | None = None


def _found_attributes(reading: Reading) -> dict[str, Any]:
    """The contexts' source, and the contexts themselves unless the span holds them."""
    found: dict[str, Any] = {semconv.CONTEXTS_SOURCE: reading.contexts_source}
    if reading.contexts_source not in (
        semconv.CONTEXT_SOURCE_EXPLICIT,
        semconv.CONTEXT_SOURCE_GROUNDING,
    ):
        assert reading.case is not None
        found[semconv.CONTEXTS] = reading.case.contexts
    return found


class EvaluationProcessor(WrapperSpanProcessor):
    """Samples finished LLM spans, evaluates them asynchronously, exports them with results.

    queue_size: sampled spans held at once (open, waiting or being evaluated); past it,
        new ones are exported unevaluated with status `dropped`.
    concurrency: evaluations running at once on the worker's event loop.
    timeout_seconds / max_retries: one deadline per evaluation, covering its retries of
        transient errors (exponential backoff with jitter).
    max_hold_seconds (enrich): the longest a span waits for its result; then it is
        exported with status `timeout` and the result follows on a carrier span.
    drain_seconds: how long `shutdown` lets running evaluations finish.
    sinks: also receive every result (e.g. Phoenix annotations, MLflow assessments);
        they deliver on their own threads, and a failing sink never holds up a span.
    reader: how LLM spans of any convention are read (contexts rules, mapping hook, the
        per-trace document store).
    """

    def __init__(
        self,
        downstream: SpanProcessor,
        evaluators: Sequence[Evaluator],
        *,
        sampler: Sampler | None = None,
        attach: Attach = "enrich",
        queue_size: int = 1024,
        concurrency: int = 16,
        timeout_seconds: float = 30.0,
        max_retries: int = 2,
        max_hold_seconds: float = 60.0,
        drain_seconds: float = 10.0,
        sinks: Sequence[ResultSink] = (),
        meter_provider: MeterProvider | None = None,
        reader: SpanReader | None = None,
    ) -> None:
        super().__init__(downstream)
        names = [e.name for e in evaluators]
        if not evaluators:
            raise ValueError("EvaluationProcessor needs at least one evaluator")
        if len(set(names)) != len(names):
            raise ValueError(f"evaluator names must be unique (they prefix attributes): {names}")
        if attach not in ("enrich", "span"):
            raise ValueError(f"attach must be 'enrich' or 'span', not {attach!r}")
        if queue_size < 1 or concurrency < 1:
            raise ValueError("queue_size and concurrency must be at least 1")
        if timeout_seconds <= 0 or max_hold_seconds <= 0 or max_retries < 0:
            raise ValueError("timeouts must be positive and max_retries not negative")
        self.evaluators = tuple(evaluators)
        self.sampler = sampler or Always()
        self.attach: Attach = attach
        self.queue_size = queue_size
        self.concurrency = concurrency
        self.policy = RetryPolicy(timeout_seconds=timeout_seconds, max_retries=max_retries)
        self.max_hold_seconds = max_hold_seconds
        self.drain_seconds = drain_seconds
        self.sinks = tuple(sinks)
        self.reader = reader or SpanReader()
        self._metrics = PipelineMetrics(
            lambda: self._held, meter_provider, lambda: self.reader.store.evictions
        )
        self._reset()
        self_ref = weakref.WeakMethod(self._reset)
        os.register_at_fork(after_in_child=lambda: (method := self_ref()) and method())

    def _reset(self) -> None:
        """Fresh state; also run in a forked child, whose parent owns the spans in flight."""
        self._lock = threading.Lock()  # guards the fields below; never held while exporting
        self._idle = threading.Condition(self._lock)
        self._reserved: dict[int, float] = {}  # span id -> sample rate of open sampled spans
        self._held = 0  # reserved + submitted and unfinished jobs
        self._jobs: set[_Job] = set()
        self._closed = False
        self._semaphore: asyncio.Semaphore | None = None
        self._worker: Worker[_Job] = Worker(self._evaluate, "tracefact-evaluation")

    # --- application threads ----------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.downstream.on_start(span, parent_context)
        attributes = plain_attributes(span)
        if span_role(attributes) != "llm":
            return
        # One attribute write per span: each costs the SDK a locked validation pass.
        marks = self.reader.on_llm_start(span, parent_context)
        if self._closed:
            marks[semconv.EVAL_STATUS] = semconv.STATUS_SHUTDOWN
        elif semconv.EVAL_STATUS not in marks:  # not nested: sample it
            decision = self.sampler.decide(SpanInfo(span.context.trace_id, span.name, attributes))
            if not decision.sampled:
                marks[semconv.EVAL_STATUS] = semconv.STATUS_SAMPLED_OUT
            elif self._reserve(span.context.span_id, decision.rate) is None:
                marks[semconv.EVAL_STATUS] = semconv.STATUS_DROPPED
            else:
                marks[semconv.EVAL_SAMPLE_RATE] = decision.rate
        span.set_attributes(marks)

    def on_end(self, span: ReadableSpan) -> None:
        attributes = plain_attributes(span)
        role = span_role(attributes)
        if role != "llm" or span.context is None:
            if role is not None or self.reader.holds_documents():
                self.reader.on_end(span, role)
            self.downstream.on_end(span)
            return
        reading = self.reader.read(span) if semconv.EVAL_STATUS not in attributes else None
        self.reader.on_end(span, role)
        status = attributes.get(semconv.EVAL_STATUS)
        if isinstance(status, str):  # decided at start, or already evaluated upstream
            self._export(span, status)
            return
        with self._lock:
            rate = self._reserved.pop(span.context.span_id, None)
        if rate is None:  # not seen at start (e.g. an LLM span recognised only now)
            decision = self.sampler.decide(SpanInfo(span.context.trace_id, span.name, attributes))
            if not decision.sampled:
                self._export_copy(span, semconv.STATUS_SAMPLED_OUT, decision.rate)
                return
            rate = self._reserve(None, decision.rate)
            if rate is None:
                self._export_copy(span, semconv.STATUS_DROPPED, decision.rate)
                return
        if self._closed or reading is None or reading.case is None:
            self._release()
            if self._closed or reading is None:
                self._export_copy(span, semconv.STATUS_SHUTDOWN, rate)
            else:
                skip = reading.skip_attributes()
                self._export_copy(span, semconv.STATUS_SKIPPED, rate, skip)
            return
        job = _Job(span, reading, rate, exported=self.attach == "span")
        with self._lock:
            self._jobs.add(job)
        if job.exported:
            self.downstream.on_end(span)
        self._worker.submit(job)

    def _reserve(self, span_id: int | None, rate: float) -> float | None:
        with self._lock:
            if self._held >= self.queue_size:
                return None
            self._held += 1
            if span_id is not None:
                self._reserved[span_id] = rate
            return rate

    def _release(self, job: _Job | None = None) -> None:
        with self._lock:
            self._held -= 1
            if job is not None:
                self._jobs.discard(job)
            self._idle.notify_all()

    def _export(self, span: ReadableSpan, status: str) -> None:
        reason = (span.attributes or {}).get(semconv.EVAL_SKIP_REASON)
        self._metrics.span_finished(status, reason if isinstance(reason, str) else None)
        try:
            self.downstream.on_end(span)
        except Exception:
            logger.exception("tracefact: downstream processor failed")

    def _export_copy(
        self, span: ReadableSpan, status: str, rate: float, extra: Mapping[str, Any] | None = None
    ) -> None:
        attributes = {semconv.EVAL_STATUS: status, semconv.EVAL_SAMPLE_RATE: rate, **(extra or {})}
        self._export(copy_with(span, attributes), status)

    # --- worker thread -------------------------------------------------------------------
    async def _evaluate(self, job: _Job) -> None:
        loop = asyncio.get_running_loop()
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.concurrency)
        if not job.exported:
            delay = job.ended + self.max_hold_seconds - time.monotonic()
            job.timer = loop.call_later(max(0.0, delay), self._hold_expired, job)
        started = time.time_ns()
        try:
            async with self._semaphore:
                outcomes = await asyncio.gather(
                    *(run_evaluator(e, job.case, self.policy) for e in self.evaluators)
                )
        finally:
            if job.timer is not None:
                job.timer.cancel()
        for outcome in outcomes:
            self._metrics.evaluated(outcome)
            if outcome.cost_usd:
                self.sampler.record_cost(outcome.cost_usd)
        attributes = {**job.found, **outcome_attributes(outcomes)}
        events = outcome_events(outcomes, time.time_ns())
        results = [o.result for o in outcomes if o.result is not None]
        self._finish(job, attributes, events, started, results)

    def _hold_expired(self, job: _Job) -> None:
        with self._lock:
            if job.exported or job.done:
                return
            job.exported = True
        self._export_copy(
            job.span, semconv.STATUS_TIMEOUT, job.sample_rate, {semconv.EVAL_ERROR: HELD_TOO_LONG}
        )

    def _finish(
        self,
        job: _Job,
        attributes: dict[str, Any],
        events: list[Event],
        started: int,
        results: Sequence[EvalResult] = (),
    ) -> None:
        """Export the job's results exactly once: on the span's copy if it is still
        held, else on a carrier span; then hand them to the sinks, before the job counts
        as finished so that `force_flush` sees them."""
        with self._lock:
            if job.done:  # shutdown already accounted for it
                return
            job.done = True
            on_copy = not job.exported
            job.exported = True
        attributes[semconv.EVAL_SAMPLE_RATE] = job.sample_rate
        status = attributes[semconv.EVAL_STATUS]
        if on_copy:
            self._export(copy_with(job.span, attributes, events), status)
        else:
            carrier = carrier_span(job.span, attributes, events, started, time.time_ns())
            if self.attach == "span":
                self._export(carrier, status)  # the carrier holds the span's status
            else:
                self.downstream.on_end(carrier)  # the span was counted as timeout
        self._publish(job.span, results)
        self._release(job)

    def _publish(self, span: ReadableSpan, results: Sequence[EvalResult]) -> None:
        assert span.context is not None, "only spans with a context are evaluated"
        for result in results:
            evaluated = EvaluatedSpan(span.context, span.name, result)
            for sink in self.sinks:
                try:
                    sink.submit(evaluated)
                except Exception:  # a sink's bug must not cost the pipeline its worker
                    logger.exception("tracefact: result sink %s failed", sink.name)

    # --- lifecycle --------------------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait for evaluations in flight, then flush downstream, then the sinks; False if
        time ran out."""
        deadline = time.monotonic() + timeout_millis / 1000

        def remaining() -> int:
            return max(0, int((deadline - time.monotonic()) * 1000))

        with self._idle:
            flushed = self._idle.wait_for(lambda: not self._jobs, timeout_millis / 1000)
        flushed = self.downstream.force_flush(remaining()) and flushed
        for sink in self.sinks:
            flushed = sink.force_flush(remaining()) and flushed
        return flushed

    def shutdown(self) -> None:
        """Let running evaluations finish for up to `drain_seconds`, export what is left
        with status `shutdown`, then shut the downstream processor down."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        with self._idle:
            self._idle.wait_for(lambda: not self._jobs, self.drain_seconds)
        self._worker.stop(timeout=5.0)
        with self._lock:
            leftovers = [job for job in self._jobs if not job.done]
            for job in leftovers:
                job.done = True
        for job in leftovers:
            attributes = {semconv.EVAL_STATUS: semconv.STATUS_SHUTDOWN}
            if not job.exported:
                self._export_copy(job.span, semconv.STATUS_SHUTDOWN, job.sample_rate)
            elif self.attach == "span":
                now = time.time_ns()
                self._export(carrier_span(job.span, attributes, [], now, now), "shutdown")
            self._release(job)
        self.downstream.shutdown()
        for sink in self.sinks:
            try:
                sink.shutdown()
            except Exception:
                logger.exception("tracefact: result sink %s failed to shut down", sink.name)
