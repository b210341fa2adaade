"""Hold and export: each sampled span leaves exactly once, with a status.

A job's span is held (`enrich`) until its results are known, then exported as a copy
carrying them; if it is held too long, or was exported at once (`attach="span"`),
the results follow on a carrier span. Whoever settles a job first (the evaluation,
the watchdog, shutdown) exports it; the slot is freed whatever the export does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor

from tracefact import semconv
from tracefact.evaluators.base import EvalResult
from tracefact.pipeline.enrich import carrier_span, copy_with
from tracefact.pipeline.fanout import FanOut
from tracefact.pipeline.job import Job
from tracefact.pipeline.metrics import PipelineMetrics
from tracefact.pipeline.options import Attach
from tracefact.pipeline.slots import Slots
from tracefact.scrubbing import clean_text

logger = logging.getLogger("tracefact")

HELD_TOO_LONG = (
    "evaluation still running after max_hold_seconds; its result follows on a carrier span"
)


class Delivery:
    """Exports spans, copies and carriers downstream, counting each span's final status."""

    def __init__(
        self,
        downstream: SpanProcessor,
        attach: Attach,
        slots: Slots,
        fanout: FanOut,
        metrics: PipelineMetrics,
    ) -> None:
        self.downstream = downstream
        self.attach = attach
        self.slots = slots
        self.fanout = fanout
        self.metrics = metrics

    def forward(self, span: ReadableSpan) -> None:
        """Send a span downstream; a failing processor there is logged, never raised."""
        try:
            self.downstream.on_end(span)
        except Exception:
            logger.exception("tracefact: downstream processor failed")

    def export(self, span: ReadableSpan, status: str, *, final: bool = True) -> None:
        """Send an LLM span downstream, counted under its final status.

        Observers see a sampled span here when this is its `final` outcome; a span
        released before its results (`timeout`) is shown to them when those arrive.
        """
        reason = (span.attributes or {}).get(semconv.EVAL_SKIP_REASON)
        self.metrics.span_finished(status, reason if isinstance(reason, str) else None)
        self.forward(span)
        if final and status != semconv.STATUS_SAMPLED_OUT:
            self.fanout.observe(span)

    def export_copy(
        self,
        span: ReadableSpan,
        status: semconv.EvalStatus,
        rate: float,
        extra: Mapping[str, Any] | None = None,
        *,
        final: bool = True,
    ) -> None:
        """Export a copy of an ended span with its status and sample rate added."""
        attributes = {semconv.EVAL_STATUS: status, semconv.EVAL_SAMPLE_RATE: rate, **(extra or {})}
        self.export(copy_with(span, attributes), status, final=final)

    def release_held(self, job: Job) -> None:
        """The hold limit passed: export the span with status `timeout`, unless it is gone."""
        with self.slots.lock:
            if job.exported or job.done:
                return
            job.exported = True
        self.export_copy(
            job.span,
            semconv.STATUS_TIMEOUT,
            job.sample_rate,
            {semconv.EVAL_ERROR: HELD_TOO_LONG},
            final=False,  # the observers see it with its results, from `finish`
        )

    def finish(
        self,
        job: Job,
        attributes: dict[str, Any],
        events: Sequence[Event] = (),
        started: int | None = None,
        results: Sequence[EvalResult] = (),
    ) -> None:
        """Export the job's outcome exactly once, then free its slot.

        On the span's copy if it is still held, else on a carrier span; the results go
        to the sinks before the slot is freed, so that `force_flush` sees them. Later
        calls for the same job do nothing.
        """
        if not self.slots.settle(job):
            return
        try:
            attributes[semconv.EVAL_SAMPLE_RATE] = job.sample_rate
            status = attributes[semconv.EVAL_STATUS]
            if not job.exported:
                self.export(copy_with(job.span, attributes, events), status)
            else:
                now = time.time_ns()
                carrier = carrier_span(job.span, attributes, events, started or now, now)
                if self.attach == "span":
                    self.export(carrier, status, final=False)  # it holds the span's status
                else:
                    self.forward(carrier)  # the span was counted as timeout
                if self.fanout.observers:  # the evaluated span's own attributes, judged
                    self.fanout.observe(copy_with(job.span, attributes))
            self.fanout.publish(job.span, results)
        finally:
            self.slots.close(job)

    def settle(self, job: Job, status: semconv.EvalStatus, error: str | None = None) -> None:
        """Finish a job without results (it failed, overran or the pipeline stops)."""
        attributes: dict[str, Any] = {semconv.EVAL_STATUS: status}
        if error is not None:
            attributes[semconv.EVAL_ERROR] = clean_text(error)
        self.finish(job, attributes)
