"""Delivery: where each verdict leaves the pipeline, the one way out for every span.

A verdict is counted in `tracefact.eval.spans` under its status (once per span: the
carrier of a span that already left with a status is not counted again), applied by the
host to its own span, and, when it is the span's final verdict, shown to the observers
(the live rate monitor) and its results handed to the result sinks. Sinks deliver on
their own threads; a failing host, sink or observer is logged and never costs the
pipeline its worker or another span its export.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar, runtime_checkable

from opentelemetry.trace import SpanContext

from tracefact import semconv
from tracefact.pipeline.metrics import PipelineMetrics
from tracefact.pipeline.verdict import SpanRecord, Verdict
from tracefact.sinks.base import EvaluatedSpan, ResultSink

logger = logging.getLogger("tracefact")

S = TypeVar("S")
S_contra = TypeVar("S_contra", contravariant=True)


@runtime_checkable
class SpanObserver(Protocol):
    """Sees each sampled LLM span once, with its final verdict.

    The verdict has the span's status and sample rate and, once judged, every evaluator's
    outcome (`verdict.span_results()` reads them as the report reads exported spans);
    the record has the span's own attributes and resource. Called on application
    threads and the evaluation loop: it must be quick, and never raise.
    """

    def observe(self, record: SpanRecord, verdict: Verdict) -> None: ...


class Apply(Protocol[S_contra]):
    """The host's half: put a verdict on its own span and send it on; never raises."""

    def __call__(self, span: S_contra, verdict: Verdict, /) -> None: ...


class Receipt(Protocol[S_contra]):
    """The host's hold on a span while `results` sink deliveries are under way.

    Asked before the verdict is applied, so a host that acknowledges its input once a
    span has left (the collector's durable queue) waits for the sinks as well. Returns
    the callback each sink calls once per result (True: cut off by shutdown), or None
    when the host keeps no hold (the span has already been let go).
    """

    def __call__(self, span: S_contra, results: int, /) -> Callable[[bool], None] | None: ...


class Delivery(Generic[S]):
    """Counts, applies and fans out verdicts; flushes and shuts the sinks down."""

    def __init__(
        self,
        apply: Apply[S],
        metrics: PipelineMetrics,
        sinks: Sequence[ResultSink] = (),
        observers: Sequence[SpanObserver] = (),
        receipt: Receipt[S] | None = None,
    ) -> None:
        self.apply = apply
        self.metrics = metrics
        self.sinks = tuple(sinks)
        self.observers = tuple(observers)
        self.receipt = receipt

    def deliver(self, record: SpanRecord, span: S, verdict: Verdict, *, count: bool = True) -> None:
        """Send one verdict out: counted (unless `count` is off), applied, observed, published."""
        if count and verdict.status is not None:
            self.metrics.span_finished(verdict.status, verdict.skip_reason)
        published = self._published(record, span, verdict)  # held before the span leaves
        try:
            self.apply(span, verdict)
        except Exception:  # the host's bug must not cost the pipeline its worker
            logger.exception("tracefact: applying a verdict failed")
        if not verdict.final:
            return
        if self.observers and verdict.status != semconv.STATUS_SAMPLED_OUT:
            for observer in self.observers:
                try:
                    observer.observe(record, verdict)
                except Exception:  # a monitor's bug must not cost the span its export
                    logger.exception("tracefact: span observer %r failed", observer)
        for evaluated in published:
            for sink in self.sinks:
                try:
                    sink.submit(evaluated)
                except Exception:  # a sink's bug must not cost the pipeline its worker
                    logger.exception("tracefact: result sink %s failed", sink.name)
                    evaluated.settle()  # it did not take the result: nothing to wait for

    def _published(self, record: SpanRecord, span: S, verdict: Verdict) -> list[EvaluatedSpan]:
        """The results the sinks get, each with the host's receipt when it keeps one."""
        if not (self.sinks and verdict.final and verdict.outcomes):
            return []
        results = verdict.results
        settled = None
        if self.receipt is not None and results:
            settled = self.receipt(span, len(results) * len(self.sinks))
        context = SpanContext(record.trace_id, record.span_id, is_remote=False)
        return [EvaluatedSpan(context, record.name, result, settled) for result in results]

    def flush_sinks(self, remaining_millis: Callable[[], int]) -> bool:
        """Flush every sink within what is left of the caller's deadline."""
        flushed = True
        for sink in self.sinks:
            try:
                flushed = sink.force_flush(remaining_millis()) and flushed
            except Exception:  # a sink's bug must not reach the caller, nor skip the others
                logger.exception("tracefact: result sink %s failed to flush", sink.name)
                flushed = False
        return flushed

    def shutdown_sinks(self) -> None:
        """Shut every sink down; one failing does not keep the others running."""
        for sink in self.sinks:
            try:
                sink.shutdown()
            except Exception:
                logger.exception("tracefact: result sink %s failed to shut down", sink.name)
