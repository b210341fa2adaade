"""SDK spans in and out of the pipeline: a span's record, a verdict as a span.

An ended SDK span is immutable, so a verdict travels either on a copy of it (every
original field kept, the verdict's attributes and events added) or on a carrier span:
OpenInference's EVALUATOR span, a child of the evaluated span with exactly one link to
it. A verdict that adds nothing leaves the span itself.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags

from tracefact import semconv
from tracefact._otel import copied
from tracefact._version import __version__
from tracefact.conventions.messages import Event as ReaderEvent
from tracefact.pipeline.verdict import NOTHING, Verdict

SCOPE = InstrumentationScope(semconv.EVALUATION_SCOPE, __version__)
_ids = RandomIdGenerator()


def plain_attributes(span: ReadableSpan) -> Mapping[str, Any]:
    """The plain dict behind the SDK's attributes, for the hot path.

    A missing key in the public mapping costs a raised and caught KeyError per lookup,
    here it costs nothing. Falls back to the public mapping should the SDK's internals
    change. Read-only.
    """
    try:
        plain: dict[str, Any] = span._attributes._dict  # type: ignore[union-attr]
    except AttributeError:
        return span.attributes or {}
    return plain


class SdkRecord:
    """An ended SDK span as the pipeline's `SpanRecord`: read through, converted when read.

    Built on the application thread for every LLM span as it ends, most of which are
    never read past their status: nothing is copied, and events are turned into the
    reader's pairs once, if ever asked for.
    """

    __slots__ = ("_events", "_span", "attributes")

    def __init__(self, span: ReadableSpan, attributes: Mapping[str, Any]) -> None:
        self._span = span
        self.attributes = attributes
        self._events: Sequence[ReaderEvent] | None = None

    @property
    def trace_id(self) -> int:
        return self._context().trace_id

    @property
    def span_id(self) -> int:
        return self._context().span_id

    @property
    def parent_id(self) -> int | None:
        parent = self._span.parent
        return parent.span_id if parent is not None else None

    @property
    def name(self) -> str:
        return self._span.name

    @property
    def events(self) -> Sequence[ReaderEvent]:
        if self._events is None:
            self._events = [(e.name, e.attributes or NOTHING) for e in self._span.events]
        return self._events

    @property
    def resource(self) -> Mapping[str, Any]:
        resource = self._span.resource
        return resource.attributes if resource is not None else NOTHING

    @property
    def end_time(self) -> int | None:
        return self._span.end_time

    def _context(self) -> SpanContext:
        context: SpanContext | None = self._span.context
        assert context is not None, "an ended SDK span always has a context"
        return context


def applied(span: ReadableSpan, verdict: Verdict) -> ReadableSpan:
    """What leaves: the span, a copy with the verdict added, or the verdict's carrier."""
    if verdict.carrier:
        return carrier_span(span, verdict)
    if not verdict.attributes and not verdict.events:
        return span
    merged = dict(span.attributes or {})
    merged.update(verdict.attributes)
    return copied(span, merged, (*span.events, *_events(verdict)))


def carrier_span(evaluated: ReadableSpan, verdict: Verdict) -> ReadableSpan:
    """An EVALUATOR span carrying a verdict for an already exported span.

    Its child in the same trace, with exactly one link to it; it lasts as long as the
    evaluation did.
    """
    target = evaluated.context
    assert target is not None, "an ended SDK span always has a context"
    context = SpanContext(
        trace_id=target.trace_id,
        span_id=_ids.generate_span_id(),
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=target.trace_state,
    )
    now = time.time_ns()
    return ReadableSpan(
        name=f"evaluate {evaluated.name}",
        context=context,
        parent=target,
        resource=evaluated.resource,
        attributes=BoundedAttributes(
            attributes={
                semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_EVALUATOR,
                **verdict.attributes,
            },
            immutable=True,
        ),
        events=_events(verdict),
        links=(Link(target),),
        kind=SpanKind.INTERNAL,
        start_time=verdict.started_unix_nano or now,
        end_time=now,
        instrumentation_scope=SCOPE,
    )


def _events(verdict: Verdict) -> list[Event]:
    return [Event(e.name, e.attributes, timestamp=e.time_unix_nano) for e in verdict.events]
