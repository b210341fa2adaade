"""Putting evaluation outcomes onto spans: attributes, events, copies and carrier spans.

An ended span is immutable, so results travel either on a copy of it (every original
field kept) or on a carrier span: OpenInference's EVALUATOR span, a child of the
evaluated span with exactly one link to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags

from tracefact import semconv
from tracefact._version import __version__
from tracefact.pipeline.outcome import Outcome

SCOPE = InstrumentationScope("tracefact.evaluation", __version__)
_ids = RandomIdGenerator()


def overall_status(outcomes: Sequence[Outcome]) -> semconv.EvalStatus:
    """Ok when every evaluator succeeded; else the worst: timeout before error."""
    statuses = {o.status for o in outcomes}
    if statuses <= {semconv.STATUS_OK}:
        return semconv.STATUS_OK
    if semconv.STATUS_TIMEOUT in statuses:
        return semconv.STATUS_TIMEOUT
    return semconv.STATUS_ERROR


def outcome_attributes(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Every result attribute, in tracefact's and OpenInference's names."""
    attributes: dict[str, Any] = {
        semconv.EVAL_STATUS: overall_status(outcomes),
        semconv.EVAL_LATENCY_MS: max((o.latency_ms for o in outcomes), default=0.0),
    }
    costs = [o.cost_usd for o in outcomes if o.cost_usd is not None]
    if costs:
        attributes[semconv.EVAL_COST_USD] = sum(costs)
    errors = [f"{o.evaluator}: {o.error}" for o in outcomes if o.error]
    if errors:
        attributes[semconv.EVAL_ERROR] = "; ".join(errors)
    index = 0
    for outcome in outcomes:
        attributes[semconv.eval_attribute(outcome.evaluator, "status")] = outcome.status
        result = outcome.result
        if result is None:
            continue
        prefix = outcome.evaluator
        attributes[semconv.eval_attribute(prefix, "label")] = result.label
        attributes[semconv.eval_attribute(prefix, "score")] = result.score
        attributes[semconv.eval_attribute(prefix, "explanation")] = result.explanation
        attributes[semconv.eval_attribute(prefix, "evaluator")] = result.evaluator
        if result.unsupported:
            attributes[semconv.eval_attribute(prefix, "unsupported")] = list(result.unsupported)
        escalation_error = result.raw.get("cascade", {}).get(semconv.EVAL_FIELD_ESCALATION_ERROR)
        if escalation_error:
            attributes[semconv.eval_attribute(prefix, semconv.EVAL_FIELD_ESCALATION_ERROR)] = str(
                escalation_error
            )
        attributes[semconv.openinference_evaluation(index, "name")] = prefix
        attributes[semconv.openinference_evaluation(index, "score")] = result.score
        attributes[semconv.openinference_evaluation(index, "label")] = result.label
        attributes[semconv.openinference_evaluation(index, "explanation")] = result.explanation
        attributes[semconv.openinference_evaluation(index, "annotator_kind")] = (
            result.annotator_kind
        )
        index += 1
    return attributes


def outcome_events(outcomes: Iterable[Outcome], timestamp: int) -> list[Event]:
    """One `gen_ai.evaluation.result` event per successful evaluation."""
    return [
        Event(
            semconv.GEN_AI_EVALUATION_EVENT,
            {
                semconv.GEN_AI_EVALUATION_NAME: o.evaluator,
                semconv.GEN_AI_EVALUATION_SCORE_VALUE: o.result.score,
                semconv.GEN_AI_EVALUATION_SCORE_LABEL: o.result.label,
                semconv.GEN_AI_EVALUATION_EXPLANATION: o.result.explanation,
            },
            timestamp=timestamp,
        )
        for o in outcomes
        if o.result is not None
    ]


def copy_with(
    span: ReadableSpan, attributes: Mapping[str, Any], events: Sequence[Event] = ()
) -> ReadableSpan:
    """The same span with attributes and events added.

    Ids, parent, times, status, events, links, resource and scope are kept.
    """
    merged = dict(span.attributes or {})
    merged.update(attributes)
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=BoundedAttributes(attributes=merged, immutable=True),
        events=(*span.events, *events),
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def carrier_span(
    evaluated: ReadableSpan,
    attributes: Mapping[str, Any],
    events: Sequence[Event],
    start_time: int,
    end_time: int,
) -> ReadableSpan:
    """An EVALUATOR span carrying results for an already exported span.

    Its child in the same trace, with exactly one link to it.
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
    return ReadableSpan(
        name=f"evaluate {evaluated.name}",
        context=context,
        parent=target,
        resource=evaluated.resource,
        attributes=BoundedAttributes(
            attributes={semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_EVALUATOR, **attributes},
            immutable=True,
        ),
        events=events,
        links=(Link(target),),
        kind=SpanKind.INTERNAL,
        start_time=start_time,
        end_time=end_time,
        instrumentation_scope=SCOPE,
    )
