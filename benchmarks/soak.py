"""Soak: many LLM spans through a chaotic evaluator and a failing exporter.

Producers on several threads end LLM spans through `tracefact.configure`; the
evaluator delays at random, raises transient and permanent errors and overruns its
timeout; the exporter fails some batches and stalls on others. At the end:

- throughput (spans a second through the application threads);
- RSS after warm-up and at the end: growth above 10% fails the run;
- accounting: produced == exported + counted export drops (fails the run otherwise),
  with the final `tracefact.eval.status` of every LLM span, exported or not.

    python benchmarks/soak.py [--spans 1000000] [--threads 4] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import tracefact
from tracefact import semconv
from tracefact.evaluators.base import EvalCase, EvalResult, EvaluatorDescription, ProviderError
from tracefact.sampling import Ratio

TIMEOUT_SECONDS = 0.2
MAX_RSS_GROWTH = 0.10


class ChaoticEvaluator:
    """Mostly answers within a few milliseconds; sometimes fails or overruns its timeout."""

    name = "hallucination"

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def describe(self) -> EvaluatorDescription:
        return EvaluatorDescription(name=self.name, evaluator="chaos")

    async def evaluate(self, case: EvalCase) -> EvalResult:
        roll = self.random.random()
        if roll < 0.05:
            raise ProviderError("503 unavailable", status_code=503, transient=True)
        if roll < 0.08:
            raise ProviderError("400 bad request", status_code=400)
        if roll < 0.10:
            await asyncio.sleep(TIMEOUT_SECONDS * 3)  # past the deadline
        else:
            await asyncio.sleep(self.random.random() * 0.005)
        return EvalResult(name=self.name, label="factual", score=0.1, evaluator="chaos")


class FlakyExporter(SpanExporter):
    """Counts what it accepts by status, carrier spans apart; fails 5% of batches."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.statuses: Counter[str] = Counter()
        self.carriers = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        roll = self.random.random()
        if roll < 0.05:
            return SpanExportResult.FAILURE
        if roll < 0.06:  # and stalls on 1%
            time.sleep(0.2)
        for span in spans:
            attributes = span.attributes or {}
            if attributes.get(semconv.OPENINFERENCE_SPAN_KIND) == semconv.KIND_EVALUATOR:
                self.carriers += 1
            else:
                self.statuses[str(attributes.get(semconv.EVAL_STATUS))] += 1
        return SpanExportResult.SUCCESS


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def metric_counts(reader: InMemoryMetricReader, name: str, attribute: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in (m for m in scope.metrics if m.name == name):
                for point in metric.data.data_points:
                    if isinstance(point, NumberDataPoint):  # a counter's
                        counts[str((point.attributes or {}).get(attribute))] += int(point.value)
    return counts


def produce(count: int, threads: int) -> None:
    """`count` evaluable LLM spans, split over `threads` application threads."""
    tracer = trace.get_tracer("soak")

    def run(share: int) -> None:
        for i in range(share):
            attributes = {
                semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_LLM,
                semconv.INPUT_VALUE: f"question {i}",
            }
            with tracer.start_as_current_span("llm", attributes=attributes) as span:
                span.set_attribute(semconv.OUTPUT_VALUE, "an answer")
                span.set_attribute(semconv.CONTEXTS, ["a context"])

    shares = [count // threads + (i < count % threads) for i in range(threads)]
    workers = [threading.Thread(target=run, args=(share,)) for share in shares]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    reader = InMemoryMetricReader()
    exporter = FlakyExporter(args.seed)
    tracefact.configure(
        exporter=exporter,
        evaluators=[ChaoticEvaluator(args.seed)],
        sampler=Ratio(0.5),
        timeout_seconds=TIMEOUT_SECONDS,
        max_retries=1,
        max_hold_seconds=3600.0,  # never reached: no carrier spans to account for
        meter_provider=MeterProvider(metric_readers=[reader]),
    )
    warm_up = max(1, args.spans // 10)
    produce(warm_up, args.threads)
    tracefact.force_flush(30_000)
    rss_warm = rss_bytes()
    started = time.perf_counter()
    produce(args.spans - warm_up, args.threads)
    elapsed = time.perf_counter() - started
    tracefact.force_flush(60_000)
    rss_end = rss_bytes()
    tracefact.shutdown()

    exported = sum(exporter.statuses.values())
    dropped = metric_counts(reader, semconv.METRIC_EXPORT_DROPPED, "reason")
    statuses = metric_counts(reader, semconv.METRIC_EVAL_SPANS, "status")
    growth = rss_end / rss_warm - 1
    print(f"spans: {args.spans} on {args.threads} threads")
    print(f"throughput after warm-up: {(args.spans - warm_up) / elapsed:,.0f} spans/s")
    print(f"RSS after warm-up: {rss_warm / 2**20:.1f} MiB, at the end: {rss_end / 2**20:.1f} MiB")
    print(f"RSS growth: {growth:+.1%} (limit {MAX_RSS_GROWTH:.0%})")
    print(f"exported: {exported} (and {exporter.carriers} carrier spans), drops: {dict(dropped)}")
    print(f"exported by status: {dict(sorted(exporter.statuses.items()))}")
    print(f"all LLM spans by status (tracefact.eval.spans): {dict(sorted(statuses.items()))}")
    balanced = exporter.carriers == 0 and exported + sum(dropped.values()) == args.spans == sum(
        statuses.values()
    )
    print(f"produced == exported + dropped == counted by status: {balanced}")
    return 0 if balanced and growth <= MAX_RSS_GROWTH else 1


if __name__ == "__main__":
    sys.exit(main())
