"""`EvaluationProcessor`: the pipeline's host in an application's SDK.

Wraps the downstream processor (usually a BatchSpanProcessor). The invariant: every
span that enters leaves exactly once; an LLM span leaves enriched with results or
with an explicit `tracefact.eval.status` saying why not.

The processor decides what only it can see, once each:
- a span's role (`conventions.roles`), as it starts and as it ends;
- nesting: an LLM span started inside a live LLM span is skipped as `nested` (one model
  call is judged once, on the outer span); so is one recognised only as it ends;
- grounding: a `tracefact.grounding(...)` block around an LLM span gives it contexts;
- admission while the span is open (so that a refusal costs no copy at its end), its
  verdict written on the open span, an admitted span's decision kept until it ends;
- a status already on the span as it ends (written while it was open, or by an
  upstream): it goes on as it is;
- remembering what retriever and tool spans return, for later LLM spans of their trace;
- forgetting a trace's evidence when its local root ends.
Everything else is the `Pipeline`'s; its verdicts come back to `_apply`, which exports
the span, a copy of it with the verdict, or a carrier span (`spans.py`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from tracefact import semconv
from tracefact._clock import SYSTEM, Clock
from tracefact._otel import reset_after_fork
from tracefact.conventions import LLM_ROLE_KEYS, ROLE_KEYS, span_role
from tracefact.evaluators.base import Evaluator
from tracefact.export import ExportProcessor
from tracefact.instrument.grounding import grounding_attributes, grounding_documents
from tracefact.instrument.pending import finished
from tracefact.pipeline.core import Pipeline
from tracefact.pipeline.delivery import SpanObserver
from tracefact.pipeline.options import PipelineOptions
from tracefact.pipeline.reading import SpanReader
from tracefact.pipeline.spans import SdkRecord, applied, plain_attributes
from tracefact.pipeline.verdict import SAMPLED_OUT, Verdict, nested, written
from tracefact.pipeline.wrapper import WrapperSpanProcessor
from tracefact.review.design import ReviewSampler
from tracefact.sampling import Always, Decision, Sampler
from tracefact.sinks.base import ResultSink

logger = logging.getLogger("tracefact")

_ROLE_KEYS_BUT_DB = ROLE_KEYS - {semconv.DB_SYSTEM}
_NOT_LIVE = object()
"""`_live`'s answer for a span not seen as it started."""
_DB_SYSTEM = semconv.DB_SYSTEM
_SAMPLED_OUT_ATTRIBUTES = dict(SAMPLED_OUT.attributes)
"""`SAMPLED_OUT`'s attributes as a plain dict, the commonest write: a dict updates the
span's from a dict four times faster than from a mappingproxy."""
_VECTOR_DBS = semconv.VECTOR_DB_SYSTEMS


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
        observers: see every sampled span's final verdict (the live rate monitor).
        meter_provider: for the pipeline's metrics (default the global one).
        reader: how LLM spans of any convention are read (context rules, mapping hook,
            the per-trace document store).
        review: selects evaluated spans for human review (`tracefact.review.*` attributes).
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
        clock: Clock = SYSTEM,
        review: ReviewSampler | None = None,
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
        self.reader = reader or SpanReader()
        self._stored_traces = self.reader.store.traces  # truthy while any trace has documents
        self._sinks = tuple(sinks)
        self._observers = tuple(observers)
        self._meter_provider = meter_provider
        self._clock = clock
        self._review = review
        super().__init__(downstream)
        # The export stage does nothing as spans start: not calling it saves a call per span.
        self._start_downstream = (
            None if isinstance(downstream, ExportProcessor) else downstream.on_start
        )
        self._end_downstream = downstream.on_end
        self._reset()
        reset_after_fork(self._reset)

    @property
    def closed(self) -> bool:
        """Shutdown has begun: spans that end from now on leave with status `shutdown`."""
        return self._pipeline.closed

    @property
    def sinks(self) -> tuple[ResultSink, ...]:
        """The result sinks."""
        return self._sinks

    def _reset(self) -> None:
        """Fresh state; also run in a forked child, whose parent owns the spans in flight."""
        self._pipeline: Pipeline[ReadableSpan] = Pipeline(
            self._apply,
            self.evaluators,
            self.options,
            sampler=self.sampler,
            reader=self.reader,
            sinks=self._sinks,
            observers=self._observers,
            meter_provider=self._meter_provider,
            clock=self._clock,
            review=self._review,
        )
        # The LLM spans started and not yet ended, by span id: each one's decision when it
        # was admitted as it started, its refusal when not, None when nested.
        self._live: dict[int, Decision | Verdict | None] = {}

    # --- application threads ----------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Decide whether the span will be evaluated while it is still open."""
        if self._start_downstream:
            self._start_downstream(span, parent_context)
        try:  # `plain_attributes` inlined: this runs for every span of the process
            attributes = span._attributes._dict  # type: ignore[union-attr]
        except AttributeError:
            attributes = plain_attributes(span)
        # Most spans carry none of the LLM role keys: one C-level check sends them on.
        if LLM_ROLE_KEYS.isdisjoint(attributes) or span_role(attributes) != "llm":
            return
        span_id = span.context.span_id
        parent = span.parent  # `_nested_in` inlined: every LLM span passes here
        if parent is not None and not parent.is_remote and parent.span_id in self._live:
            _write(span, nested(f"{parent.span_id:016x}").attributes)
            self._live[span_id] = None
        else:
            # One C-level operation (atomic under the GIL), and only this span's start and
            # end touch its id: no lock.
            self._live[span_id] = self._admit_open(span, attributes, parent_context)

    def _admit_open(
        self, span: Span, attributes: Mapping[str, Any], parent_context: Context | None
    ) -> Decision | Verdict | None:
        """Grounding and admission on the open span, in one attribute write.

        The decision when admitted; a refusal is written on the span now and returned
        (None for shutdown).
        """
        marks = {} if semconv.CONTEXTS in attributes else grounding_attributes(parent_context)
        pipeline = self._pipeline
        if pipeline.closed:
            _write(span, {**marks, semconv.EVAL_STATUS: semconv.STATUS_SHUTDOWN})
            return None
        answer = pipeline.admission.admit(span.context.trace_id, span.name, attributes)
        if isinstance(answer, Verdict):  # refused
            refusal = _SAMPLED_OUT_ATTRIBUTES if answer is SAMPLED_OUT else answer.attributes
            _write(span, {**marks, **refusal} if marks else refusal)
            return answer
        _write(span, {**marks, semconv.EVAL_SAMPLE_RATE: answer.rate})
        return answer

    def on_end(self, span: ReadableSpan) -> None:
        """Export the span at once, or hand it to the pipeline."""
        try:  # `plain_attributes` inlined, as in `on_start`
            attributes = span._attributes._dict  # type: ignore[union-attr]
        except AttributeError:
            attributes = plain_attributes(span)
        # Most spans carry none of the role keys, and a database's is no vector store's:
        # they go straight on, one call to the export stage.
        if (
            _ROLE_KEYS_BUT_DB.isdisjoint(attributes)
            and attributes.get(_DB_SYSTEM) not in _VECTOR_DBS
        ):
            if self._stored_traces:
                self._forget_at_root(span)
            self._end_downstream(span)
            return
        context = span.context
        entry = _NOT_LIVE if context is None else self._live.pop(context.span_id, _NOT_LIVE)
        if entry is SAMPLED_OUT:  # its status went on as it started: it leaves as it is
            self._pipeline.sampled_out()
            self._end_downstream(span)
            if self._stored_traces:
                self._forget_at_root(span)
            return
        live = entry is not _NOT_LIVE  # an LLM span seen as it started
        role = "llm" if live else span_role(attributes)
        if role != "llm" or context is None:
            if role is not None and context is not None:  # a retriever or a tool
                events = [(e.name, e.attributes or {}) for e in span.events]
                self.reader.remember(context.trace_id, role, attributes, events, span.end_time)
            if self._stored_traces:
                self._forget_at_root(span)
            self._end_downstream(span)
            return
        admitted = entry if isinstance(entry, Decision) else None
        pipeline = self._pipeline
        record = SdkRecord(span, attributes)
        if isinstance(attributes.get(semconv.EVAL_STATUS), str):  # while open, or upstream
            if admitted is not None:
                pipeline.admission.release(admitted)
            pipeline.deliver(record, span, written(attributes))
        elif not live and (nested_in := self._nested_in(span)) is not None:
            pipeline.deliver(record, span, nested(nested_in))  # recognised only as it ends
        else:  # read on the evaluation loop: the app thread pays for no content
            grounding = () if live else grounding_documents()
            pipeline.evaluate(record, span, admitted, grounding, lambda: _prepared(span))
        if self._stored_traces:
            self._forget_at_root(span)

    def _nested_in(self, span: ReadableSpan) -> str | None:
        """The live LLM span this one was started in (16 hex digits), if any."""
        parent = span.parent
        if parent is None or parent.is_remote or parent.span_id not in self._live:
            return None
        return f"{parent.span_id:016x}"

    def _forget_at_root(self, span: ReadableSpan) -> None:
        """A local root ended: its trace's documents go (read first by its LLM spans)."""
        parent, context = span.parent, span.context
        if context is not None and (parent is None or parent.is_remote):
            self.reader.forget(context.trace_id)

    # --- verdicts -----------------------------------------------------------------------
    def _apply(self, span: ReadableSpan, verdict: Verdict) -> None:
        """Export the span, its copy with the verdict, or the verdict's carrier span."""
        try:
            self.downstream.on_end(applied(span, verdict))
        except Exception:
            logger.exception("tracefact: downstream processor failed")

    # --- lifecycle --------------------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait for evaluations in flight, then flush downstream, then the sinks.

        False if time ran out.
        """
        deadline = time.monotonic() + timeout_millis / 1000

        def remaining() -> int:
            return max(0, int((deadline - time.monotonic()) * 1000))

        flushed = self._pipeline.wait_idle(timeout_millis / 1000)
        flushed = self.downstream.force_flush(remaining()) and flushed
        return self._pipeline.flush_sinks(remaining) and flushed

    def shutdown(self) -> None:
        """Let running evaluations finish for up to `drain_seconds`, then stop.

        What is left is exported with status `shutdown`, then the downstream processor
        and the sinks are shut down.
        """
        if not self._pipeline.drain():
            return
        self.downstream.shutdown()
        self._pipeline.shutdown_sinks()


def _prepared(span: ReadableSpan) -> tuple[SdkRecord, ReadableSpan]:
    """The span as it is judged and exported: its pending content finished first."""
    span = finished(span)
    return SdkRecord(span, plain_attributes(span)), span


def _write(span: Span, attributes: Mapping[str, Any]) -> None:
    """Write tracefact's own attributes (str and float values) onto a span as it starts.

    No other thread holds a span before its start returns, so they go straight into the
    SDK's attribute dict, without the span's lock and a validation pass each (which cost
    more than the decision itself); through `set_attributes` where the SDK keeps them
    otherwise, or where they would pass its limit on attributes.
    """
    bounded = getattr(span, "_attributes", None)
    plain = getattr(bounded, "_dict", None)
    maxlen = getattr(bounded, "maxlen", None)
    if type(plain) is not dict or (maxlen is not None and len(plain) + len(attributes) > maxlen):
        span.set_attributes(attributes)
        return
    plain.update(attributes)
