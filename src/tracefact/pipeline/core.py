"""`Pipeline`: the evaluation pipeline as both hosts share it, span records in, verdicts out.

A host hands over each ended LLM span it wants judged as a `SpanRecord` with its own
span object (`evaluate`), and gets back `Verdict`s through its `apply`; what the host
decided alone (a span nested in another, a status written while it was open) it sends
out through `deliver`, so that every span leaves by one way and is counted once. The
parts, each owning its state:
- `Admission`: sampled out, dropped, or a place in flight (before any case is read);
- `SpanReader`: the case, with the documents retrieved earlier in the trace;
- `Jobs`: each admitted span's transitions, under one lock;
- `Worker` (its own thread): an asyncio loop running each job's `Evaluation`, which
  keeps the job's one deadline;
- `Watchdog` (its own thread): hold limits, and a loop an evaluator has blocked;
- `Delivery`: counts, applies and fans out verdicts (sinks, observers);
- `ReviewSampler` (optional): each evaluated span's selection for human review, added to
  its final verdict on the evaluation loop.
"""

from __future__ import annotations

import logging
import threading
from collections import ChainMap
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from opentelemetry.metrics import MeterProvider

from tracefact import semconv
from tracefact._clock import SYSTEM, Clock
from tracefact.evaluators.base import Evaluator
from tracefact.pipeline.admission import Admission
from tracefact.pipeline.delivery import Apply, Delivery, Receipt, SpanObserver
from tracefact.pipeline.evaluation import Evaluation
from tracefact.pipeline.jobs import Job, Jobs, Unread
from tracefact.pipeline.metrics import PipelineMetrics
from tracefact.pipeline.options import PipelineOptions
from tracefact.pipeline.reading import SpanReader
from tracefact.pipeline.retry import RetryPolicy
from tracefact.pipeline.verdict import RELEASED, SpanRecord, Verdict, skipped, unevaluated
from tracefact.pipeline.watchdog import Watchdog
from tracefact.pipeline.worker import Worker
from tracefact.review.design import ReviewSampler
from tracefact.sampling import Decision, Sampler
from tracefact.sinks.base import ResultSink

logger = logging.getLogger("tracefact")

S = TypeVar("S")

HELD_TOO_LONG = (
    "evaluation still running after max_hold_seconds; its result follows on a carrier span"
)
LOOP_BLOCKED = "an evaluator blocked the evaluation loop; the loop was replaced"
MIN_GRACE_SECONDS = 0.5
"""The least time a loop may go without a heartbeat before it counts as stuck."""
STOP_SECONDS = 1.0
"""How long `drain` waits for the loop thread after cancelling what still runs."""


class Pipeline(Generic[S]):
    """Admits, reads, evaluates and delivers the LLM spans of one host (spans of type `S`)."""

    def __init__(
        self,
        apply: Apply[S],
        evaluators: Sequence[Evaluator],
        options: PipelineOptions,
        *,
        sampler: Sampler,
        reader: SpanReader,
        sinks: Sequence[ResultSink] = (),
        observers: Sequence[SpanObserver] = (),
        receipt: Receipt[S] | None = None,
        meter_provider: MeterProvider | None = None,
        clock: Clock = SYSTEM,
        review: ReviewSampler | None = None,
        bounded: bool = False,
    ) -> None:
        """`bounded`: the sampler passes only while admission has room (`Admission`)."""
        self.options = options
        self.review = review
        self.clock = clock
        self.reader = reader
        self.admission = Admission(options.queue_size, sampler, bounded=bounded)
        self._metrics = PipelineMetrics(
            lambda: self.admission.in_flight, meter_provider, lambda: reader.store.evictions
        )
        if meter_provider is not None:  # sinks made before it count there too
            for sink in sinks:
                use = getattr(sink, "use_meter_provider", None)
                if callable(use):
                    use(meter_provider)
        self._delivery = Delivery(apply, self._metrics, sinks, observers, receipt)
        self.sampled_out = self._metrics.sampled_out
        """Count a span refused as it started (`SAMPLED_OUT`, written on it then): its
        host sends it on as it is; no observer weighs it and no sink gets a result."""
        self._held = options.attach == "enrich"
        # On a busy machine a healthy loop can miss a tenth of a second; replacing it
        # then would time out jobs that were about to finish.
        grace = max(MIN_GRACE_SECONDS, min(options.timeout_seconds, 1.0))
        policy = RetryPolicy(
            timeout_seconds=options.timeout_seconds, max_retries=options.max_retries
        )
        self._jobs: Jobs[S] = Jobs(self._new_worker(), clock)
        self._evaluation = Evaluation(
            evaluators, policy, grace, self._jobs, self._metrics, self._finish
        )
        tick = max(min(0.1, options.max_hold_seconds / 4, grace / 4), 0.005)
        self._watchdog = Watchdog(
            self._jobs,
            self._release,
            options.max_hold_seconds,
            grace,
            tick,
            stuck=lambda now: now - self._jobs.worker.beat_at > grace,
            replace=self._replace_worker,
            heartbeat=lambda: self._jobs.worker.ping(),
            clock=clock,
        )

        _warn_without_credentials(evaluators)

    @property
    def closed(self) -> bool:
        """Shutdown has begun: spans are no longer evaluated."""
        return self._jobs.closed

    # --- spans in ------------------------------------------------------------------------
    def evaluate(
        self,
        record: SpanRecord,
        span: S,
        admitted: Decision | None = None,
        grounding: Sequence[str] = (),
        prepare: Callable[[], tuple[SpanRecord, S]] | None = None,
    ) -> None:
        """Judge one ended LLM span: every path ends in verdicts through `apply`.

        `admitted`: the decision of a span admitted while it was open (the SDK admits as
        spans start); without one, admission decides now. `grounding`: documents of a
        `tracefact.grounding` block not yet on the span. `prepare`: with `admitted`, the
        span is read on the evaluation loop, not on the caller's thread, from the record
        and span `prepare` gives there (while spans are held until judged; else now).
        """
        if admitted is None:
            answer = self.admission.admit(record.trace_id, record.name, record.attributes)
            if isinstance(answer, Verdict):  # refused
                self._delivery.deliver(record, span, answer)
                return
            admitted = answer
        reading = None
        unread = None
        if prepare is not None and self._held:
            unread = Unread(prepare, grounding, self.reader.evidence(record.trace_id))
        else:
            if prepare is not None:
                record, span = prepare()
            reading = self.reader.read(record, grounding)
            if reading.case is None:
                self.admission.release(admitted)
                self._delivery.deliver(record, span, skipped(reading, admitted.rate))
                return
        job = Job(record, span, admitted, reading, self._held, self.clock.now(), unread)
        worker = self._jobs.open(job)
        if worker is None:  # shutdown began
            self.admission.release(admitted)
            self._delivery.deliver(
                record, span, unevaluated(semconv.STATUS_SHUTDOWN, admitted.rate)
            )
            return
        if not job.held:  # attach "span": it leaves now, its verdict follows on a carrier
            self._delivery.deliver(record, span, RELEASED)
        self._watchdog.start()
        worker.submit(job)

    def deliver(self, record: SpanRecord, span: S, verdict: Verdict) -> None:
        """Send out a verdict the host decided alone (nested, or already on the span)."""
        self._delivery.deliver(record, span, verdict)

    # --- verdicts out ----------------------------------------------------------------------
    def _release(self, job: Job[S]) -> None:
        """The hold limit passed: the span leaves with status `timeout`, unless it is gone."""
        if self._jobs.release(job, counted=True):
            verdict = unevaluated(
                semconv.STATUS_TIMEOUT, job.decision.rate, HELD_TOO_LONG, final=False
            )  # the observers see the span with its results, from `_finish`
            self._delivery.deliver(job.record, job.span, verdict)

    def _finish(self, job: Job[S], verdict: Verdict, review: bool = True) -> None:
        """Deliver a job's last verdict, once, then give its place in flight back.

        On the span itself while it is held, else on a carrier span; the results reach
        the sinks before the place is given back (with what judging cost, for a
        budget), so that `force_flush` sees them.
        """
        finished = self._jobs.finish(job)
        if finished is None:
            return
        if self.review is not None and review:  # a span with nothing to judge is not reviewed
            verdict = self._selected(job, verdict)
        try:
            if finished.held:
                self._delivery.deliver(job.record, job.span, verdict)
            else:
                self._delivery.deliver(
                    job.record, job.span, verdict.on_carrier(), count=not finished.counted
                )
        finally:
            if self._jobs.close(job):
                self.admission.release(job.decision, verdict.cost_usd)

    def _selected(self, job: Job[S], verdict: Verdict) -> Verdict:
        """The verdict with the span's review selection: decided here, once, per evaluated span."""
        assert self.review is not None
        rate = verdict.sample_rate
        if rate is None or not 0.0 < rate <= 1.0:
            return verdict
        record = job.record
        seen = ChainMap(dict(verdict.attributes), dict(record.attributes))
        chosen = self.review.select(record.span_id, 1.0 / rate, seen, record.resource)
        return verdict._replace(attributes={**verdict.attributes, **chosen})

    # --- the evaluation loop ---------------------------------------------------------------
    def _new_worker(self) -> Worker[Job[S]]:
        return Worker(self._run, "tracefact-evaluation", self.options.concurrency, self.clock)

    async def _run(self, job: Job[S]) -> None:
        if job.unread is not None and not self._read(job):
            return
        await self._evaluation.run(job)

    def _read(self, job: Job[S]) -> bool:
        """Read a job's span on the evaluation loop; False when it has nothing to judge.

        A span with nothing to judge leaves with its skip reason, as on the host's thread.
        """
        unread, job.unread = job.unread, None
        assert unread is not None
        job.record, job.span = unread.prepare()
        job.reading = self.reader.read(job.record, unread.grounding, unread.evidence)
        if job.reading.case is not None:
            return True
        self._finish(job, skipped(job.reading, job.decision.rate), review=False)
        return False

    def _replace_worker(self) -> None:
        """Swap a blocked loop for a fresh one.

        Its running jobs end with `timeout`; those it never started move to the new loop.
        """
        new = self._new_worker()
        old, started, moved = self._jobs.replace(new)
        logger.warning("tracefact: %s", LOOP_BLOCKED)
        old.stop(timeout=0)
        for job in moved:
            new.submit(job)
        for job in started:
            self._finish(job, unevaluated(semconv.STATUS_TIMEOUT, job.decision.rate, LOOP_BLOCKED))

    # --- lifecycle ---------------------------------------------------------------------------
    def wait_idle(self, timeout_seconds: float) -> bool:
        """Wait for the jobs in flight to end; False if time ran out."""
        return self._jobs.wait_idle(timeout_seconds)

    def flush_sinks(self, remaining_millis: Callable[[], int]) -> bool:
        """Flush the result sinks within what is left of the caller's deadline."""
        return self._delivery.flush_sinks(remaining_millis)

    def drain(self) -> bool:
        """Let running evaluations finish for up to `drain_seconds`, then stop.

        What is left gets status `shutdown`. False, doing nothing, when called again.
        """
        if not self._jobs.shut():
            return False
        self._jobs.wait_idle(self.options.drain_seconds)
        self._watchdog.stop()
        self._jobs.worker.stop(timeout=STOP_SECONDS)
        for job in self._jobs.unfinished():
            self._finish(job, unevaluated(semconv.STATUS_SHUTDOWN, job.decision.rate))
        return True

    def shutdown_sinks(self) -> None:
        """Shut the result sinks down (after the host's own downstream)."""
        self._delivery.shutdown_sinks()


def _warn_without_credentials(evaluators: Sequence[Evaluator]) -> None:
    """Judges whose API key is missing say so once as the pipeline starts.

    Not at the first span's end; on a thread of its own, so configure() never imports
    litellm.
    """
    checks = [
        check
        for evaluator in evaluators
        if callable(check := getattr(evaluator, "warn_without_credentials", None))
    ]
    if not checks:
        return

    def run() -> None:
        for check in checks:
            try:
                check()
            except Exception:  # the first evaluation reports what this could not check
                logger.debug("tracefact: checking credentials failed", exc_info=True)

    threading.Thread(target=run, name="tracefact-credentials", daemon=True).start()
