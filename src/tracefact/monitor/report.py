"""What `tracefact report` says about a spans file: rates, scores, worst cases, cost, coverage.

The figures come from the same pieces as the live metrics: `conventions.results` reads
each span's results and `monitor.estimator` weighs them, so a report and a dashboard over
the same spans agree. Drawing them is `monitor.html`'s job.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tracefact import semconv
from tracefact.conventions import read_case
from tracefact.conventions.results import read_results
from tracefact.evaluators.base import HALLUCINATED
from tracefact.monitor.estimator import Estimate, Observation, RateEstimator, estimate_all
from tracefact.monitor.spans import JudgedSpan, read_judged
from tracefact.review.report import ReviewReport
from tracefact.spans_file import BadLine, SpansFileReader

MAX_POINTS = 400
"""At most this many points per line of a rate-over-time chart, whatever the window."""
SCORE_BINS = 20
NOT_EVALUATED = "(not evaluated)"
"""How the report counts LLM spans that carry no `tracefact.eval.status` at all."""


@dataclass(frozen=True, slots=True)
class Point:
    time: float
    rate: float | None
    lower: float
    upper: float
    n_eff: float


@dataclass(frozen=True, slots=True)
class Series:
    """One evaluator's windowed rate for one group, step by step."""

    evaluator: str
    group: Mapping[str, str]
    points: list[Point]


@dataclass(frozen=True, slots=True)
class Case:
    """A judged answer, for the worst-cases table."""

    evaluator: str
    group: Mapping[str, str]
    score: float
    label: str
    explanation: str
    unsupported: tuple[str, ...]
    question: str
    answer: str
    contexts: tuple[str, ...]
    trace_id: str
    """The first trace with this answer."""
    time: float
    repeats: int = 1
    """Judged answers with the same question and answer (the same mistake, made again)."""


@dataclass(frozen=True, slots=True)
class Cost:
    """Evaluation spend and latency for one group (all evaluators of a span together)."""

    group: Mapping[str, str]
    evaluated: int
    priced: int
    usd: float
    latencies_ms: tuple[float, ...]

    def latency(self, quantile: float) -> float | None:
        if not self.latencies_ms:
            return None
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, math.floor(quantile * len(ordered)))]


@dataclass
class Report:
    """Everything the HTML shows, computed once."""

    source: str
    group_by: tuple[str, ...]
    window_seconds: float
    lines: int = 0
    spans: int = 0
    bad_count: int = 0
    bad_lines: list[BadLine] = field(default_factory=list)
    start: float | None = None
    end: float | None = None
    statuses: Counter[str] = field(default_factory=Counter)
    """LLM spans by `tracefact.eval.status` (the final one)."""
    skip_reasons: Counter[str] = field(default_factory=Counter)
    overall: list[Estimate] = field(default_factory=list)
    """Per evaluator over every group, the whole file."""
    by_group: list[Estimate] = field(default_factory=list)
    """Per evaluator and group, the whole file."""
    series: list[Series] = field(default_factory=list)
    scores: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    """Evaluator to label to counts per score bin (SCORE_BINS bins over [0, 1])."""
    worst: list[Case] = field(default_factory=list)
    costs: list[Cost] = field(default_factory=list)
    review: ReviewReport | None = None
    """The evaluator against people, when labels were given (`tracefact report --labels`)."""


def build_report(
    path: Path,
    group_by: Sequence[str] = ("model",),
    window_seconds: float | None = None,
    worst: int = 10,
) -> Report:
    """Read `path` whole and compute the report (OSError when it cannot be read)."""
    reader = SpansFileReader(path)
    read = read_judged(reader)
    ordered, count = read.judged, read.spans
    times = [e.time for e in ordered]
    report = Report(
        source=str(path),
        group_by=tuple(group_by),
        window_seconds=window_seconds or _default_window(times),
        lines=reader.lines,
        spans=count,
        bad_count=reader.bad_count,
        bad_lines=list(reader.bad_lines),
        start=min(times, default=None),
        end=max(times, default=None),
    )
    _count_statuses(report, ordered)
    if read.waiting:
        report.statuses[NOT_EVALUATED] = read.waiting
    observations = _rates(report, ordered)
    report.overall = estimate_all(dataclasses.replace(o, group=()) for o in observations)
    report.by_group = estimate_all(observations, report.group_by)
    _scores_and_worst(report, ordered, worst)
    report.costs = _costs(report, ordered)
    return report


def _default_window(times: Sequence[float]) -> float:
    """A fifth of the run, so each point of a chart rests on a fifth of the data."""
    if len(times) < 2:
        return 60.0
    return max((max(times) - min(times)) / 5, 1e-3)


def _count_statuses(report: Report, spans: Iterable[JudgedSpan]) -> None:
    for span in spans:
        status = span.attributes.get(semconv.EVAL_STATUS)
        report.statuses[str(status)] += 1
        reason = span.attributes.get(semconv.EVAL_SKIP_REASON)
        if status == semconv.STATUS_SKIPPED:
            report.skip_reasons[str(reason or semconv.SKIP_NO_ANSWER)] += 1


def _rates(report: Report, spans: Sequence[JudgedSpan]) -> list[Observation]:
    """Every observation, and the windowed rate at each step of the run."""
    step = report.window_seconds / 5
    estimator = RateEstimator(
        group_by=report.group_by,
        max_groups=1000,
        window_seconds=report.window_seconds,
        bucket_seconds=step,
    )
    observations: list[Observation] = []
    series: dict[tuple[str, tuple[tuple[str, str], ...]], list[Point]] = {}

    def snapshot(now: float) -> None:
        for estimate in estimator.estimates(now):
            key = (estimate.evaluator, tuple(estimate.group.items()))
            series.setdefault(key, []).append(
                Point(now, estimate.rate, estimate.lower, estimate.upper, estimate.n_eff)
            )

    if spans:
        spacing = max(step, (spans[-1].time - spans[0].time) / MAX_POINTS)
        next_step = (math.floor(spans[0].time / step) + 1) * step
        for span in spans:
            while span.time >= next_step:
                snapshot(next_step - step / 2)
                next_step += spacing
            observations.extend(estimator.add_span(span.attributes, span.resource, span.time))
        snapshot(next_step - step / 2)
    report.series = [
        Series(evaluator, dict(group), points) for (evaluator, group), points in series.items()
    ]
    return observations


def _scores_and_worst(report: Report, spans: Iterable[JudgedSpan], worst: int) -> None:
    grouper = RateEstimator(group_by=report.group_by)
    cases: list[tuple[float, JudgedSpan, str]] = []
    for span in spans:
        results = read_results(span.attributes)
        if results is None:
            continue
        for name, result in results.evaluators.items():
            if result.status != semconv.STATUS_OK or result.score is None or not result.label:
                continue
            bins = report.scores.setdefault(name, {}).setdefault(result.label, [0] * SCORE_BINS)
            bins[min(SCORE_BINS - 1, max(0, math.floor(result.score * SCORE_BINS)))] += 1
            if result.label == HALLUCINATED:  # the worst cases: what a person should read
                cases.append((result.score, span, name))
    cases.sort(key=lambda c: (-c[0], c[1].time))
    distinct: dict[tuple[str, str, str, str], Case] = {}
    for _, span, name in cases:
        case = _case(span, name, grouper)
        key = (name, str(case.group), case.question, case.answer)
        if key in distinct:
            distinct[key] = dataclasses.replace(distinct[key], repeats=distinct[key].repeats + 1)
        elif len(distinct) < worst:
            distinct[key] = case
    report.worst = list(distinct.values())


def _case(span: JudgedSpan, name: str, grouper: RateEstimator) -> Case:
    attributes = span.attributes
    case = read_case(attributes, span.span.events).case
    unsupported = attributes.get(semconv.eval_attribute(name, "unsupported"))
    return Case(
        evaluator=name,
        group=grouper.labels(grouper.group_of(attributes, span.resource)),
        score=float(attributes[semconv.eval_attribute(name, "score")]),
        label=str(attributes.get(semconv.eval_attribute(name, "label"), "")),
        explanation=str(attributes.get(semconv.eval_attribute(name, "explanation"), "")),
        unsupported=tuple(str(u) for u in unsupported)
        if isinstance(unsupported, (list, tuple))
        else (),
        question=case.input if case else "",
        answer=case.output if case else "",
        contexts=tuple(case.contexts) if case else (),
        trace_id=f"{span.key[0]:032x}",
        time=span.time,
    )


def _costs(report: Report, spans: Iterable[JudgedSpan]) -> list[Cost]:
    grouper = RateEstimator(group_by=report.group_by)
    by_group: dict[tuple[str, ...], list[JudgedSpan]] = {}
    for span in spans:
        if span.attributes.get(semconv.EVAL_STATUS) in (
            semconv.STATUS_OK,
            *semconv.UNJUDGED_STATUSES,
        ):
            by_group.setdefault(grouper.group_of(span.attributes, span.resource), []).append(span)
    costs = []
    for group, members in sorted(by_group.items()):
        prices = [_cost(m) for m in members]
        latencies = [m.attributes.get(semconv.EVAL_LATENCY_MS) for m in members]
        costs.append(
            Cost(
                group=grouper.labels(group),
                evaluated=len(members),
                priced=sum(p is not None for p in prices),
                usd=sum(p for p in prices if p is not None),
                latencies_ms=tuple(float(x) for x in latencies if isinstance(x, (int, float))),
            )
        )
    return costs


def _cost(span: JudgedSpan) -> float | None:
    results = read_results(span.attributes)
    return None if results is None else results.cost_usd


def headline(estimate: Estimate) -> str:
    """One estimate in words: `40.0% hallucinated (95%: 34.0–46.2%), 240 judged`."""
    judged = f"{estimate.totals.judged} judged"
    if estimate.rate is None:
        return f"no rate yet, {judged}"
    coverage = estimate.coverage
    covered = "" if coverage is None or coverage >= 1 else f", coverage {100 * coverage:.0f}%"
    return (
        f"{100 * estimate.rate:.1f}% hallucinated "
        f"(95%: {100 * estimate.lower:.1f}–{100 * estimate.upper:.1f}%), {judged}{covered}"
    )
