"""`EvaluationProcessor`: evaluates sampled LLM spans off the application's threads.

Wraps the downstream processor (usually a BatchSpanProcessor). The invariant: every
span that enters leaves exactly once; an LLM span leaves enriched with results or
with an explicit `tracefact.eval.status` saying why not. Every job ends: whatever
the input, the evaluator or the downstream processor does, its span is exported
with a status and its slot freed.

The processor wires the parts and owns their lifecycle:
- `Admission` (application thread, `on_start`/`on_end`): sampling decision and a slot.
- `Worker` (its own thread): an asyncio loop running each job's `Evaluation`.
- `Delivery`: exports each span exactly once, as a copy or with a carrier span.
- `FanOut`: hands results to the result sinks.
- `Watchdog` (its own thread): hold limits and deadlines; replaces a stuck loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from tracefact import semconv
from tracefact._otel import reset_after_fork
from tracefact.conventions import LLM_ROLE_KEYS, ROLE_KEYS, span_role
from tracefact.evaluators.base import Evaluator
from tracefact.pipeline.admission import Admission
from tracefact.pipeline.delivery import Delivery
from tracefact.pipeline.enrich import copy_with
from tracefact.pipeline.evaluation import Evaluation
from tracefact.pipeline.fanout import FanOut, SpanObserver
from tracefact.pipeline.job import Job
from tracefact.pipeline.metrics import PipelineMetrics
from tracefact.pipeline.options import PipelineOptions
from tracefact.pipeline.reading import SpanReader, plain_attributes
from tracefact.pipeline.retry import RetryPolicy
from tracefact.pipeline.slots import Slots
from tracefact.pipeline.watchdog import Watchdog
from tracefact.pipeline.worker import Worker
from tracefact.pipeline.wrapper import WrapperSpanProcessor
from tracefact.sampling import Always, Sampler
from tracefact.sinks.base import ResultSink

logger = logging.getLogger("tracefact")

LOOP_BLOCKED = "an evaluator blocked the evaluation loop; the loop was replaced"
MIN_GRACE_SECONDS = 0.5
"""The least time a loop may go without a heartbeat before it counts as stuck."""
STOP_SECONDS = 1.0
"""How long `shutdown` waits for the loop thread after cancelling what still runs."""


class EvaluationProcessor(WrapperSpanProcessor):
    """Samples finished LLM spans, evaluates them asynchronously, exports them with results.

    Options come as a `PipelineOptions` or as its fields by keyword
    (`EvaluationProcessor(downstream, evaluators, queue_size=8)`).

    Args:
        downstream: where spans go next (usually a BatchSpanProcessor).
        evaluators: what judges each sampled span; names must be unique.
        options: the pipeline's knobs; keywords override single fields.
        sampler: which spans are evaluated (default every one).
        sinks: also receive every result (e.g. Phoenix annotations); they deliver on
            their own threads, and a failing sink never holds up a span.
        observers: see every sampled span's final outcome (the live rate monitor).
        meter_provider: for the pipeline's metrics (default the global one).
        reader: how LLM spans of any convention are read (context rules, mapping hook,
            the per-trace document store).
    """

    def __init__(
        self,
        downstream: SpanProcessor,
        evaluators: Sequence[Evaluator],
        options: PipelineOptions | None = None,
        *,
        sampler: Sampler | None = None,
        sinks: Sequence[ResultSink] = (),
        observers: Sequence[SpanObserver] = (),
        meter_provider: MeterProvider | None = None,
        reader: SpanReader | None = None,
        **overrides: Any,
    ) -> None:
        names = [e.name for e in evaluators]
        if not evaluators:
            raise ValueError("EvaluationProcessor needs at least one evaluator")
        if len(set(names)) != len(names):
            raise ValueError(f"evaluator names must be unique (they prefix attributes): {names}")
        base = options.model_dump() if options is not None else {}
        self.options = PipelineOptions(**{**base, **overrides})
        self.evaluators = tuple(evaluators)
        self.sampler = sampler or Always()
        self.policy = RetryPolicy(
            timeout_seconds=self.options.timeout_seconds, max_retries=self.options.max_retries
        )
        self._fanout = FanOut(sinks, observers)
        self.reader = reader or SpanReader()
        self._stored_traces = self.reader.store.traces  # truthy while any trace has documents
        self._metrics = PipelineMetrics(
            lambda: self._slots.held, meter_provider, lambda: self.reader.store.evictions
        )
        self._downstream = downstream
        super().__init__(downstream)
        self._reset()
        reset_after_fork(self._reset)

    @property
    def downstream(self) -> SpanProcessor:
        """The processor behind this one (replaceable, as for any wrapper)."""
        return self._downstream

    @downstream.setter
    def downstream(self, processor: SpanProcessor) -> None:
        self._downstream = processor
        delivery: Delivery | None = getattr(self, "_delivery", None)
        if delivery is not None:
            delivery.downstream = processor

    @property
    def sinks(self) -> tuple[ResultSink, ...]:
        """The result sinks."""
        return self._fanout.sinks

    @property
    def grace_seconds(self) -> float:
        """How long past its timeout a job, or the loop, may stay unresponsive.

        Never under half a second: on a busy machine a healthy loop can miss a tenth of
        a second, and replacing it then would time out jobs that were about to finish.
        """
        return max(MIN_GRACE_SECONDS, min(self.options.timeout_seconds, 1.0))

    def _reset(self) -> None:
        """Fresh state; also run in a forked child, whose parent owns the spans in flight."""
        options = self.options
        self._closed = False
        self._slots = Slots(options.queue_size, self.sampler)
        self._admission = Admission(self.sampler, self._slots)
        self._delivery = Delivery(
            self._downstream, options.attach, self._slots, self._fanout, self._metrics
        )
        self._evaluation = Evaluation(
            self.evaluators,
            self.policy,
            self._metrics,
            self._slots,
            self._delivery,
            self.options.timeout_seconds + self.grace_seconds,
        )
        self._worker = self._new_worker()
        tick = min(0.1, options.max_hold_seconds / 4, self.grace_seconds / 4)
        self._watchdog = Watchdog(
            self._slots,
            self._delivery,
            options.max_hold_seconds,
            max(tick, 0.005),
            stuck=lambda now: now - self._worker.beat_at > self.grace_seconds,
            replace=self._replace_worker,
            heartbeat=lambda: self._worker.ping(),
        )

    def _new_worker(self) -> Worker[Job]:
        return Worker(
            self._evaluation.run,
            "tracefact-evaluation",
            self.options.concurrency,
            self._evaluation.deadline_seconds,
        )

    # --- application threads ----------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Decide whether the span will be evaluated while it is still open."""
        self._downstream.on_start(span, parent_context)
        try:  # `plain_attributes` inlined: this runs for every span of the process
            attributes = span._attributes._dict  # type: ignore[union-attr]
        except AttributeError:
            attributes = plain_attributes(span)
        # Most spans carry none of the LLM role keys: one C-level check sends them on.
        if attributes.keys().isdisjoint(LLM_ROLE_KEYS) or span_role(attributes) != "llm":
            return
        marks = self.reader.on_llm_start(span, parent_context)  # nested, or grounded
        if self._closed:
            marks[semconv.EVAL_STATUS] = semconv.STATUS_SHUTDOWN
        if marks:
            span.set_attributes(marks)
        if semconv.EVAL_STATUS not in marks:
            self._admission.at_start(span)

    def on_end(self, span: ReadableSpan) -> None:
        """Export the span at once, or hand it to the evaluation loop."""
        try:  # `plain_attributes` inlined, as in `on_start`
            attributes = span._attributes._dict  # type: ignore[union-attr]
        except AttributeError:
            attributes = plain_attributes(span)
        role = None if attributes.keys().isdisjoint(ROLE_KEYS) else span_role(attributes)
        if role != "llm" or span.context is None:
            if role is not None or self._stored_traces:  # a retriever, or a root to forget
                self.reader.on_end(span, role)
            self._downstream.on_end(span)
            return
        reading = self.reader.read(span) if semconv.EVAL_STATUS not in attributes else None
        self.reader.on_end(span, role)
        if reading is not None and reading.skip_reason == semconv.SKIP_NESTED:
            self._admission.release(span)
            skipped = {semconv.EVAL_STATUS: semconv.STATUS_SKIPPED, **reading.skip_attributes()}
            self._delivery.export(copy_with(span, skipped), semconv.STATUS_SKIPPED)
            return
        status = attributes.get(semconv.EVAL_STATUS)
        if isinstance(status, str):  # decided at start, or already evaluated upstream
            self._admission.release(span)
            self._delivery.export(span, status)
            return
        admitted = self._admission.at_end(span)
        if admitted.status is not None:
            self._delivery.export_copy(span, admitted.status, admitted.rate)
            return
        if reading is None or reading.case is None:
            self._slots.free(admitted.decision)
            skip = reading.skip_attributes() if reading is not None else {}
            self._delivery.export_copy(span, semconv.STATUS_SKIPPED, admitted.rate, skip)
            return
        job = Job(span, admitted.decision, exported=self.options.attach == "span")
        job.reading = reading
        with self._slots.lock:  # shutdown settles every job opened before it closed
            closed = self._closed
            if not closed:
                self._slots.open_locked(job)
                job.worker = worker = self._worker
        if closed:
            self._slots.free(admitted.decision)
            self._delivery.export_copy(span, semconv.STATUS_SHUTDOWN, admitted.rate)
            return
        if job.exported:
            self._delivery.forward(span)
        self._watchdog.start()
        worker.submit(job)

    # --- evaluation loop -------------------------------------------------------------
    def _replace_worker(self) -> None:
        """Swap a stuck loop for a fresh one.

        Its running jobs end with `timeout`; those it never started move to the new loop.
        """
        with self._slots.lock:
            old, new = self._worker, self._new_worker()
            self._worker = new
            waiting = [j for j in self._slots.unsettled_locked() if j.worker is old]
            for job in waiting:
                if job.deadline is None:
                    job.worker = new
        logger.warning("tracefact: %s", LOOP_BLOCKED)
        old.stop(timeout=0)
        for job in waiting:
            if job.worker is new:
                new.submit(job)
            else:
                self._delivery.settle(job, semconv.STATUS_TIMEOUT, LOOP_BLOCKED)

    # --- lifecycle --------------------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait for evaluations in flight, then flush downstream, then the sinks.

        False if time ran out.
        """
        deadline = time.monotonic() + timeout_millis / 1000

        def remaining() -> int:
            return max(0, int((deadline - time.monotonic()) * 1000))

        flushed = self._slots.wait_idle(timeout_millis / 1000)
        flushed = self._downstream.force_flush(remaining()) and flushed
        return self._fanout.force_flush(remaining) and flushed

    def shutdown(self) -> None:
        """Let running evaluations finish for up to `drain_seconds`, then stop.

        What is left is exported with status `shutdown`, then the downstream processor
        and the sinks are shut down.
        """
        with self._slots.lock:
            if self._closed:
                return
            self._closed = True
        self._slots.wait_idle(self.options.drain_seconds)
        self._watchdog.stop()
        self._worker.stop(timeout=STOP_SECONDS)
        for job in self._slots.unsettled():
            self._delivery.settle(job, semconv.STATUS_SHUTDOWN)
        self._downstream.shutdown()
        self._fanout.shutdown()
