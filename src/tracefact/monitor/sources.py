"""Where `tracefact monitor` reads from: a Prometheus endpoint, or a spans file as it grows.

Each source answers `poll()` with a `Snapshot`: the windowed rate of each evaluator and
group with its interval, throughput, queue depth and drops. A source that cannot be
read says why in the snapshot and keeps its last figures; it never raises.
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import httpx

from tracefact import semconv
from tracefact._imports import import_extra
from tracefact.monitor.estimator import RateEstimator
from tracefact.monitor.spans import JudgedSpans
from tracefact.spans_file import SpansFileReader


@dataclass(frozen=True, slots=True)
class Row:
    """One evaluator's windowed rate for one group."""

    evaluator: str
    group: Mapping[str, str]
    rate: float | None
    lower: float
    upper: float
    n_eff: float | None
    coverage: float | None


@dataclass
class Snapshot:
    """What the view shows at one moment; empty where the source cannot know."""

    source: str
    taken: float = 0.0
    """When it was taken (Unix seconds)."""
    rows: list[Row] = field(default_factory=list)
    throughput: dict[str, float] = field(default_factory=dict)
    """Per second since the previous poll (empty on the first): `LLM spans` finished,
    `judged`, and at a collector `received` and `forwarded` spans."""
    queues: dict[str, float] = field(default_factory=dict)
    """What waits, by queue: `evaluation` (sampled spans), at a collector `requests`
    (received, not yet all upstream) and `forwarding` (spans held for upstreams)."""
    statuses: Counter[str] = field(default_factory=Counter)
    """LLM spans by final status, since the source started counting."""
    drops: dict[str, float] = field(default_factory=dict)
    """Where spans were lost or left unjudged, by name."""
    error: str | None = None
    """Why this poll could not read the source (its last figures are kept)."""
    notes: list[str] = field(default_factory=list)
    review: list[ReviewRow] = field(default_factory=list)
    """The corrected rate per evaluator, where the source holds human labels."""


@dataclass(frozen=True, slots=True)
class ReviewRow:
    """One evaluator's corrected rate (people's labels), from the collector's gauges."""

    evaluator: str
    group: str
    shown: bool
    rate: float | None
    lower: float | None
    upper: float | None
    labels: int
    pending: int


class Source(Protocol):
    def poll(self) -> Snapshot: ...


LLM_SPANS, JUDGED, RECEIVED, FORWARDED = "LLM spans", "judged", "received", "forwarded"
"""The names of `Snapshot.throughput`."""


class _Rates:
    """Per-second rates of cumulative counts between two polls."""

    def __init__(self) -> None:
        self._last: tuple[float, dict[str, float]] | None = None

    def update(self, now: float, counts: dict[str, float]) -> dict[str, float] | None:
        last, self._last = self._last, (now, counts)
        if last is None or now <= last[0]:
            return None
        elapsed = now - last[0]
        return {k: max(0.0, v - last[1].get(k, 0.0)) / elapsed for k, v in counts.items()}


# --- Prometheus ------------------------------------------------------------------------

_SCOPE_LABEL = "otel_scope_"
"""OpenTelemetry's Prometheus exporter adds the instrumentation scope as labels."""


def prometheus_name(metric: str, suffix: str = "") -> str:
    """The Prometheus spelling of an OpenTelemetry metric name (``.`` becomes ``_``)."""
    return metric.replace(".", "_") + suffix


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


def parse_prometheus_text(text: str) -> list[Sample]:
    """Every sample of a Prometheus text exposition (ValueError when it is not one)."""
    parser = import_extra("prometheus_client.parser", "monitor")
    return [
        Sample(s.name, dict(s.labels), float(s.value))
        for family in parser.text_string_to_metric_families(text)
        for s in family.samples
    ]


REVIEW_GAUGES: Mapping[str, str] = {
    prometheus_name(name): name
    for name in (
        semconv.METRIC_REVIEW_RATE,
        semconv.METRIC_REVIEW_RATE_LOWER,
        semconv.METRIC_REVIEW_RATE_UPPER,
        semconv.METRIC_REVIEW_LABELS,
        semconv.METRIC_REVIEW_PENDING,
        semconv.METRIC_REVIEW_SHOWN,
    )
}
"""The collector's corrected-rate gauges by their Prometheus names."""


class PrometheusSource:
    """Scrapes a tracefact process's (or the collector's) `/metrics`.

    The rates are the process's own windowed gauges (`tracefact.monitor.rate` and its
    bounds); throughput comes from the counters' growth between polls.
    """

    RATE = prometheus_name(semconv.METRIC_MONITOR_RATE)
    LOWER = prometheus_name(semconv.METRIC_MONITOR_RATE_LOWER)
    UPPER = prometheus_name(semconv.METRIC_MONITOR_RATE_UPPER)
    N_EFF = prometheus_name(semconv.METRIC_MONITOR_N_EFF)
    COVERAGE = prometheus_name(semconv.METRIC_MONITOR_COVERAGE)
    SPANS = prometheus_name(semconv.METRIC_EVAL_SPANS, "_total")
    QUEUE = prometheus_name(semconv.METRIC_EVAL_QUEUE_DEPTH)
    EVAL_DROPPED = prometheus_name(semconv.METRIC_EVAL_DROPPED, "_total")
    EXPORT_DROPPED = prometheus_name(semconv.METRIC_EXPORT_DROPPED, "_total")
    RECEIVED = prometheus_name(semconv.METRIC_COLLECTOR_RECEIVED, "_total")
    FORWARDED = prometheus_name(semconv.METRIC_COLLECTOR_FORWARDED, "_total")
    REJECTED = prometheus_name(semconv.METRIC_COLLECTOR_REJECTED, "_total")
    UPSTREAM_FAILED = prometheus_name(semconv.METRIC_COLLECTOR_UPSTREAM_FAILED, "_total")
    REQUESTS_QUEUED = prometheus_name(semconv.METRIC_COLLECTOR_QUEUE_DEPTH)
    FORWARD_BUFFERED = prometheus_name(semconv.METRIC_COLLECTOR_BUFFERED)

    def __init__(
        self, url: str, timeout: float = 3.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.url = url
        self.timeout = timeout
        self.clock = clock
        self._rates = _Rates()
        self._last = Snapshot(source=url)

    def poll(self) -> Snapshot:
        now = self.clock()
        try:
            response = httpx.get(self.url, timeout=self.timeout)
            response.raise_for_status()
            samples = parse_prometheus_text(response.text)
        except (httpx.HTTPError, ValueError) as exc:
            self._last.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return self._last
        snapshot = self._snapshot(samples, now)
        self._last = snapshot
        return snapshot

    def _snapshot(self, samples: Iterable[Sample], now: float) -> Snapshot:
        snapshot = Snapshot(source=self.url, taken=now)
        counts: defaultdict[str, float] = defaultdict(float)
        gauges: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, float]] = {}
        review: dict[tuple[str, str], dict[str, float]] = {}
        for sample in samples:
            labels = {k: v for k, v in sample.labels.items() if not k.startswith(_SCOPE_LABEL)}
            if sample.name in REVIEW_GAUGES:
                evaluator = labels.get(semconv.MONITOR_EVALUATOR, "")
                who = (evaluator, labels.get(semconv.REVIEW_GROUP, ""))
                review.setdefault(who, {})[REVIEW_GAUGES[sample.name]] = sample.value
            elif sample.name in (self.RATE, self.LOWER, self.UPPER, self.N_EFF, self.COVERAGE):
                evaluator = labels.pop(semconv.MONITOR_EVALUATOR, "")
                key = (evaluator, tuple(sorted(labels.items())))
                gauges.setdefault(key, {})[sample.name] = sample.value
            else:
                self._count(snapshot, sample.name, labels, sample.value, counts)
        for (evaluator, group), values in sorted(gauges.items()):
            rate = values.get(self.RATE)
            snapshot.rows.append(
                Row(
                    evaluator=evaluator,
                    group=dict(group),
                    rate=rate if rate is not None and math.isfinite(rate) else None,
                    lower=values.get(self.LOWER, 0.0),
                    upper=values.get(self.UPPER, 1.0),
                    n_eff=values.get(self.N_EFF),
                    coverage=values.get(self.COVERAGE),
                )
            )
        if not gauges:
            snapshot.notes.append(
                f"no {self.RATE} here yet: nothing judged in the window, or not a tracefact "
                "endpoint"
            )
        snapshot.review = [_review_row(key, values) for key, values in sorted(review.items())]
        counts[LLM_SPANS] = float(sum(snapshot.statuses.values()))
        counts[JUDGED] = float(snapshot.statuses.get(semconv.STATUS_OK, 0))
        snapshot.throughput = self._rates.update(now, dict(counts)) or {}
        return snapshot

    def _count(
        self,
        snapshot: Snapshot,
        name: str,
        labels: Mapping[str, str],
        value: float,
        counts: defaultdict[str, float],
    ) -> None:
        """A sample other than the rate gauges: statuses, queues, drops, throughput."""
        if name == self.SPANS:
            snapshot.statuses[labels.get(semconv.MONITOR_STATUS, "?")] += int(value)
        elif name == self.QUEUE:
            snapshot.queues["evaluation"] = snapshot.queues.get("evaluation", 0.0) + value
        elif name == self.REQUESTS_QUEUED:
            snapshot.queues["requests"] = value
        elif name == self.FORWARD_BUFFERED:
            snapshot.queues["forwarding"] = value
        elif name == self.EVAL_DROPPED:
            snapshot.drops[f"evaluation {semconv.REFUSED_FULL}"] = value
        elif name == self.EXPORT_DROPPED:
            snapshot.drops[f"export {labels.get(semconv.METRIC_REASON, '?')}"] = value
        elif name == self.REJECTED:
            key = f"rejected {labels.get(semconv.METRIC_REASON, '?')}"
            snapshot.drops[key] = snapshot.drops.get(key, 0.0) + value
        elif name == self.UPSTREAM_FAILED:
            key = f"upstream {labels.get(semconv.METRIC_REASON, '?')}"
            snapshot.drops[key] = snapshot.drops.get(key, 0.0) + value
        elif name == self.RECEIVED:
            counts[RECEIVED] += value
        elif name == self.FORWARDED:
            counts[FORWARDED] += value


def _review_row(key: tuple[str, str], values: Mapping[str, float]) -> ReviewRow:
    shown = values.get(semconv.METRIC_REVIEW_SHOWN) == 1.0
    return ReviewRow(
        evaluator=key[0],
        group=key[1],
        shown=shown,
        rate=values.get(semconv.METRIC_REVIEW_RATE) if shown else None,
        lower=values.get(semconv.METRIC_REVIEW_RATE_LOWER) if shown else None,
        upper=values.get(semconv.METRIC_REVIEW_RATE_UPPER) if shown else None,
        labels=int(values.get(semconv.METRIC_REVIEW_LABELS, 0)),
        pending=int(values.get(semconv.METRIC_REVIEW_PENDING, 0)),
    )


# --- a spans file ------------------------------------------------------------------------


class SpansFileSource:
    """Follows a spans file as it grows, estimating as the SDK's monitor does.

    The window ends at the newest span read, so a file written earlier shows its last
    window. A carrier that arrives after its span was counted as `timeout` adds its
    verdict; the `timeout` is not taken back (the report, reading the whole file, does).
    """

    def __init__(
        self,
        path: Path,
        group_by: tuple[str, ...] = ("model",),
        window_seconds: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.clock = clock
        self._reader = SpansFileReader(path)
        self._spans = JudgedSpans()
        self._estimator = RateEstimator(
            group_by=group_by,
            max_groups=100,
            window_seconds=window_seconds,
            bucket_seconds=window_seconds / 30,
        )
        self._statuses: Counter[str] = Counter()
        self._newest: float | None = None
        self._rates = _Rates()
        self._last = Snapshot(source=str(path))

    def poll(self) -> Snapshot:
        now = self.clock()
        try:
            spans = self._reader.read()
        except OSError as exc:
            self._last.error = f"{exc.strerror or exc}: {self.path}"
            return self._last
        for item in spans:
            evaluated = self._spans.add(item)
            if evaluated is None:
                continue
            if evaluated.replaces is None:
                self._statuses[str(evaluated.attributes.get(semconv.EVAL_STATUS))] += 1
            self._estimator.add_span(evaluated.attributes, evaluated.resource, evaluated.time)
            self._newest = max(self._newest or evaluated.time, evaluated.time)
        snapshot = Snapshot(source=str(self.path), taken=now, statuses=Counter(self._statuses))
        if self._newest is not None:
            snapshot.rows = [
                Row(e.evaluator, e.group, e.rate, e.lower, e.upper, e.n_eff, e.coverage)
                for e in self._estimator.estimates(self._newest)
            ]
        for status in semconv.UNJUDGED_STATUSES:
            snapshot.drops[status] = float(self._statuses.get(status, 0))
        counts = {
            LLM_SPANS: float(sum(self._statuses.values())),
            JUDGED: float(self._statuses.get(semconv.STATUS_OK, 0)),
        }
        snapshot.throughput = self._rates.update(now, counts) or {}
        if self._reader.bad_count:
            snapshot.notes.append(f"{self._reader.bad_count} lines were not OTLP/JSON, skipped")
        self._last = snapshot
        return snapshot
