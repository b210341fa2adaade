"""The pipeline's unit of work, neutral to its host: a `SpanRecord` in, `Verdict`s out.

A host (the SDK's `EvaluationProcessor`, the collector's engine) turns its own span into
a record, which holds what `conventions` reads, and applies each verdict to its own span
type: a copy or a carrier span in the SDK, the held protobuf span or a protobuf carrier
in the collector. The attributes and events a verdict adds are built here, once, for both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from tracefact import semconv
from tracefact.conventions import Reading
from tracefact.conventions.messages import Event
from tracefact.conventions.results import EvaluatorResult, SpanResults, read_results
from tracefact.evaluators.base import EvalResult
from tracefact.scrubbing import clean_text

NOTHING: Mapping[str, Any] = MappingProxyType({})


class SpanRecord(Protocol):
    """What the pipeline reads of an ended span, whatever the host's span type.

    `attributes`, `events` and `resource` are read, never changed: a host may hand over
    its span's own mappings rather than copies, and read them only when asked (the SDK's
    record reads through its span: most records are never read past their status).
    """

    @property
    def trace_id(self) -> int: ...
    @property
    def span_id(self) -> int: ...
    @property
    def parent_id(self) -> int | None: ...
    @property
    def name(self) -> str: ...
    @property
    def attributes(self) -> Mapping[str, Any]: ...
    @property
    def events(self) -> Sequence[Event]: ...
    @property
    def resource(self) -> Mapping[str, Any]: ...
    @property
    def end_time(self) -> int | None:
        """When the span ended (unix nanoseconds), where known."""
        ...


# Records and verdicts are named tuples: immutable, and built on application threads for
# every LLM span, where a frozen dataclass costs three times as much to make.


class Record(NamedTuple):
    """A `SpanRecord` held as data (the collector's decoded protobuf span)."""

    trace_id: int
    span_id: int
    parent_id: int | None
    name: str
    attributes: Mapping[str, Any]
    events: Sequence[Event] = ()
    resource: Mapping[str, Any] = NOTHING
    end_time: int | None = None


class SpanEvent(NamedTuple):
    """An event a verdict adds to its span (`gen_ai.evaluation.result`)."""

    name: str
    attributes: Mapping[str, Any]
    time_unix_nano: int


@dataclass(frozen=True, slots=True)
class Outcome:
    """One evaluator's result on one span, or why there is none."""

    evaluator: str
    status: semconv.EvalStatus
    """ok | error | timeout"""
    result: EvalResult | None = None
    error: str | None = None
    latency_ms: float = 0.0
    spent_usd: float | None = None
    """What a failed evaluation still cost; a result carries its own cost."""

    @property
    def cost_usd(self) -> float | None:
        """What the evaluation cost, whether or not it gave a result."""
        return self.result.cost_usd if self.result is not None else self.spent_usd


class Verdict(NamedTuple):
    """What the pipeline says about one span, for its host to apply.

    `attributes` and `events` are what the span gets (its status and sample rate among
    them); a host adds them, changing nothing the span already has. A verdict with
    `carrier` set is for a span that has already left: its host sends them on a carrier
    span (OpenInference's EVALUATOR span, a child of the span with one link to it).
    Observers see a span's `final` verdict; a span released before its results (attach
    "span", or held past `max_hold_seconds`) gets a verdict that is not final first.
    """

    status: semconv.EvalStatus | None
    """None only for a span leaving before any verdict (attach "span")."""
    sample_rate: float | None = None
    attributes: Mapping[str, Any] = NOTHING
    events: tuple[SpanEvent, ...] = ()
    outcomes: tuple[Outcome, ...] = ()
    """Each evaluator's outcome, for a span that was judged."""
    final: bool = True
    carrier: bool = False
    skip_reason: str | None = None
    started_unix_nano: int | None = None
    """When its evaluation started (a carrier span's start time)."""
    written: Mapping[str, Any] | None = None
    """For a verdict that was already on the span: the span's attributes."""

    @property
    def results(self) -> tuple[EvalResult, ...]:
        """The evaluators' results (the sinks get each one)."""
        return tuple(o.result for o in self.outcomes if o.result is not None)

    @property
    def cost_usd(self) -> float | None:
        """What judging the span cost (the sampler's budget); None when nothing says."""
        priced = [o for o in self.outcomes if o.cost_usd or o.status == semconv.STATUS_OK]
        return sum(o.cost_usd or 0.0 for o in priced) if priced else None

    def span_results(self) -> SpanResults:
        """The verdict as `conventions.results` reads one off an exported span."""
        if self.written is not None:
            read = read_results(self.written)
            if read is not None:
                return read
        evaluators = {
            o.evaluator: EvaluatorResult(
                o.status,
                o.result.label if o.result is not None else None,
                o.result.score if o.result is not None else None,
                o.result.explanation if o.result is not None else None,
            )
            for o in self.outcomes
        }
        rate = self.sample_rate
        cost = self.attributes.get(semconv.EVAL_COST_USD)
        return SpanResults(
            status=self.status or semconv.STATUS_OK,
            sample_rate=rate if rate is not None and 0.0 < rate <= 1.0 else None,
            evaluators=evaluators,
            cost_usd=cost if isinstance(cost, float) else None,
        )

    def on_carrier(self) -> Verdict:
        """The same verdict for a span that has left: it goes on a carrier span."""
        return self._replace(carrier=True)


RELEASED = Verdict(None, final=False)
"""The span leaves now as it is; its verdict follows on a carrier span (attach "span")."""
SAMPLED_OUT = Verdict(
    semconv.STATUS_SAMPLED_OUT,
    attributes=MappingProxyType({semconv.EVAL_STATUS: semconv.STATUS_SAMPLED_OUT}),
)
"""The verdict on every span the sampler passes over."""


def refused(reason: semconv.Refusal, rate: float) -> Verdict:
    """Not admitted to evaluation, for `reason`: its status says why (`REFUSAL_STATUS`).

    A `sampled_out` span gets its status only (nobody weighs it: one verdict serves
    them all); a `dropped` one its sample rate too, as the monitor counts its weight
    against the rate's coverage.
    """
    if reason == semconv.REFUSED_SAMPLED_OUT:
        return SAMPLED_OUT
    status = semconv.REFUSAL_STATUS[reason]
    return Verdict(status, rate, {semconv.EVAL_STATUS: status, semconv.EVAL_SAMPLE_RATE: rate})


def skipped(reading: Reading, rate: float | None = None) -> Verdict:
    """Sampled, but nothing to judge (or nested in another LLM span): why, on the span."""
    reason = reading.skip_reason or semconv.SKIP_NO_ANSWER
    attributes: dict[str, Any] = {semconv.EVAL_STATUS: semconv.STATUS_SKIPPED}
    if rate is not None:
        attributes[semconv.EVAL_SAMPLE_RATE] = rate
    attributes.update(reading.skip_attributes())
    return Verdict(semconv.STATUS_SKIPPED, rate, attributes, skip_reason=reason)


def nested(nested_in: str) -> Verdict:
    """An LLM span inside a live LLM span: one model call is judged once, on the outer span."""
    return skipped(Reading(None, skip_reason=semconv.SKIP_NESTED, nested_in=nested_in))


def unevaluated(
    status: semconv.EvalStatus,
    rate: float | None = None,
    error: str | None = None,
    *,
    final: bool = True,
) -> Verdict:
    """Sampled and readable, but no result: it timed out, failed or the pipeline stopped."""
    attributes: dict[str, Any] = {semconv.EVAL_STATUS: status}
    if rate is not None:
        attributes[semconv.EVAL_SAMPLE_RATE] = rate
    if error is not None:
        attributes[semconv.EVAL_ERROR] = clean_text(error)
    return Verdict(status, rate, attributes, final=final)


def judged(
    outcomes: Sequence[Outcome], reading: Reading, rate: float, started: int, now: int
) -> Verdict:
    """Every evaluator's outcome, with where the contexts came from."""
    attributes = {**found_attributes(reading), **outcome_attributes(outcomes)}
    attributes[semconv.EVAL_SAMPLE_RATE] = rate
    return Verdict(
        attributes[semconv.EVAL_STATUS],
        rate,
        attributes,
        outcome_events(outcomes, now),
        tuple(outcomes),
        started_unix_nano=started,
    )


def written(attributes: Mapping[str, Any]) -> Verdict:
    """The verdict a span already carries (set while it was open, or by an upstream).

    It adds nothing; its status, sample rate and skip reason are read off the span.
    """
    rate = attributes.get(semconv.EVAL_SAMPLE_RATE)
    reason = attributes.get(semconv.EVAL_SKIP_REASON)
    return Verdict(  # positional: this runs on application threads
        attributes.get(semconv.EVAL_STATUS),  # someone else's status is counted as written
        rate if type(rate) in (float, int) else None,
        NOTHING,
        (),
        (),
        True,
        False,
        reason if type(reason) is str else None,
        None,
        attributes,
    )


def found_attributes(reading: Reading) -> dict[str, Any]:
    """The contexts' source, the contexts unless the span holds them, the tool calls used."""
    found: dict[str, Any] = {semconv.CONTEXTS_SOURCE: reading.contexts_source}
    explicit = (semconv.CONTEXT_SOURCE_EXPLICIT, semconv.CONTEXT_SOURCE_GROUNDING)
    if reading.case is not None and reading.contexts_source not in explicit:
        # Copied from other spans (a retriever's, a tool's): scrubbed like all tracefact writes.
        found[semconv.CONTEXTS] = [clean_text(text) for text in reading.case.contexts]
    if reading.tool_calls:
        found[semconv.CONTEXTS_TOOL_CALLS] = list(reading.tool_calls)
    return found


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


def outcome_events(outcomes: Sequence[Outcome], timestamp: int) -> tuple[SpanEvent, ...]:
    """One `gen_ai.evaluation.result` event per successful evaluation."""
    return tuple(
        SpanEvent(
            semconv.GEN_AI_EVALUATION_EVENT,
            {
                semconv.GEN_AI_EVALUATION_NAME: o.evaluator,
                semconv.GEN_AI_EVALUATION_SCORE_VALUE: o.result.score,
                semconv.GEN_AI_EVALUATION_SCORE_LABEL: o.result.label,
                semconv.GEN_AI_EVALUATION_EXPLANATION: o.result.explanation,
            },
            timestamp,
        )
        for o in outcomes
        if o.result is not None
    )


def cleaned(outcome: Outcome) -> Outcome:
    """The outcome with the texts tracefact will write scrubbed and valid UTF-8.

    An explanation may quote the answer, an error the provider's message (with a key
    in it): both end up on spans and in sink payloads.
    """
    result = outcome.result
    if result is not None:
        raw = result.raw
        cascade = raw.get("cascade")
        if isinstance(cascade, dict) and cascade.get(semconv.EVAL_FIELD_ESCALATION_ERROR):
            escalation = clean_text(str(cascade[semconv.EVAL_FIELD_ESCALATION_ERROR]))
            raw = {**raw, "cascade": {**cascade, semconv.EVAL_FIELD_ESCALATION_ERROR: escalation}}
        explanation = clean_text(result.explanation)
        unsupported = [clean_text(text) for text in result.unsupported]
        if (
            explanation != result.explanation
            or unsupported != result.unsupported
            or raw is not result.raw
        ):
            result = result.model_copy(
                update={"explanation": explanation, "unsupported": unsupported, "raw": raw}
            )
    error = None if outcome.error is None else clean_text(outcome.error)
    if result is outcome.result and error == outcome.error:  # the usual case: nothing to scrub
        return outcome
    return replace(outcome, result=result, error=error)
