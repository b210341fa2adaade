"""The evaluation pipeline's cost to the application, its throughput and its memory.

1. Per-span processor time on the application thread (on_start + on_end, p50/p99):
   a BatchSpanProcessor alone versus the same processor behind an EvaluationProcessor
   whose evaluator hangs, so its queue is saturated and every span is dropped.
2. The same for spans that are not LLM spans (a root and a child per trace): the
   processor must cost at most 1.1x a bare BatchSpanProcessor there.
3. OpenInference LLM spans as its OpenAI instrumentor writes them (flattened messages,
   JSON request and response bodies, a RETRIEVER span before): the cost of reading them
   on the application thread.
4. Evaluations per second with a 50 ms asynchronous evaluator at concurrency 64.
5. Memory held per queued span (tracemalloc).

    python benchmarks/pipeline.py [--spans 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import time
import tracemalloc
from collections.abc import Callable, Mapping, Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.util.types import AttributeValue

from tracefact import semconv
from tracefact.evaluators.base import EvalCase, EvalResult, EvaluatorDescription
from tracefact.pipeline import EvaluationProcessor, WrapperSpanProcessor
from tracefact.sampling import Always, Never, Sampler


class DiscardingExporter(SpanExporter):
    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS


class SleepingEvaluator:
    """Answers after `seconds` (forever when None), like a remote judge."""

    name = "hallucination"

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds

    def describe(self) -> EvaluatorDescription:
        return EvaluatorDescription(name=self.name, evaluator="sleep")

    async def evaluate(self, case: EvalCase) -> EvalResult:
        if self.seconds is None:
            await asyncio.Event().wait()
        await asyncio.sleep(self.seconds or 0)
        return EvalResult(name=self.name, label="factual", score=0.1, evaluator="sleep")


class Timed(WrapperSpanProcessor):
    """Records how long the wrapped processor keeps the application thread per span."""

    def __init__(self, downstream: SpanProcessor) -> None:
        super().__init__(downstream)
        self.ns: list[int] = []
        self._start_ns = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        started = time.perf_counter_ns()
        self.downstream.on_start(span, parent_context)
        self._start_ns = time.perf_counter_ns() - started

    def on_end(self, span: ReadableSpan) -> None:
        started = time.perf_counter_ns()
        self.downstream.on_end(span)
        self.ns.append(self._start_ns + time.perf_counter_ns() - started)


LLM_ATTRIBUTES = {
    semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_LLM,
    semconv.INPUT_VALUE: "When was the Eiffel Tower completed?",
}


def emit(provider: TracerProvider, count: int) -> None:
    tracer = provider.get_tracer("benchmark")
    for _ in range(count):
        with tracer.start_as_current_span("llm", attributes=LLM_ATTRIBUTES) as span:
            span.set_attribute(semconv.OUTPUT_VALUE, "It was completed in 1889.")
            span.set_attribute(semconv.CONTEXTS, ["The Eiffel Tower was completed in 1889."])


def emit_plain(provider: TracerProvider, count: int) -> None:
    """Spans of the application that are not LLM spans: a root and a child per trace."""
    tracer = provider.get_tracer("benchmark")
    attributes = {"http.request.method": "GET", "url.path": "/search", "db.system": "redis"}
    for _ in range(count // 2):
        with (
            tracer.start_as_current_span("request", attributes=attributes),
            tracer.start_as_current_span("cache.get", attributes=attributes),
        ):
            pass


QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "It was completed in 1889."
DOCUMENT = "The Eiffel Tower was completed in 1889."
OPENINFERENCE_RETRIEVER = {
    semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_RETRIEVER,
    semconv.INPUT_VALUE: QUESTION,
    "retrieval.documents.0.document.content": DOCUMENT,
}
OPENINFERENCE_LLM = {
    "llm.system": "openai",
    semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_LLM,
    semconv.INPUT_VALUE: json.dumps(
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": QUESTION}]}
    ),
    semconv.INPUT_MIME_TYPE: semconv.MIME_JSON,
    "llm.input_messages.0.message.role": "user",
    "llm.input_messages.0.message.content": QUESTION,
    "llm.model_name": "gpt-4o-mini",
}
OPENINFERENCE_LLM_END: dict[str, AttributeValue] = {
    semconv.OUTPUT_VALUE: json.dumps(
        {"id": "chatcmpl-1", "choices": [{"message": {"role": "assistant", "content": ANSWER}}]}
    ),
    semconv.OUTPUT_MIME_TYPE: semconv.MIME_JSON,
    "llm.output_messages.0.message.role": "assistant",
    "llm.output_messages.0.message.content": ANSWER,
    "llm.token_count.prompt": 12,
    "llm.token_count.completion": 7,
}


def emit_openinference(provider: TracerProvider, count: int) -> None:
    """Traces as OpenInference's OpenAI instrumentor (and a retriever) record them."""
    tracer = provider.get_tracer("benchmark")
    for _ in range(count // 2):
        with tracer.start_as_current_span("rag"):
            with tracer.start_as_current_span("retrieve", attributes=OPENINFERENCE_RETRIEVER):
                pass
            with tracer.start_as_current_span("ChatCompletion", attributes=OPENINFERENCE_LLM) as s:
                s.set_attributes(OPENINFERENCE_LLM_END)


Emit = Callable[[TracerProvider, int], None]


def measure_setup(sampler: Sampler | None, spans: int, emitter: Emit = emit) -> tuple[float, float]:
    """p50 and p99 of processor time per span, with evaluation off (None) or on."""
    downstream = BatchSpanProcessor(DiscardingExporter(), max_queue_size=spans * 2)
    processor: SpanProcessor = downstream
    if sampler is not None:
        processor = EvaluationProcessor(
            downstream,
            [SleepingEvaluator(None)],
            sampler=sampler,
            queue_size=64,
            drain_seconds=0.1,
        )
    timed = Timed(processor)
    provider = TracerProvider()
    provider.add_span_processor(timed)
    emitter(provider, 200)  # warm up, and fill the queue
    timed.ns.clear()
    gc.collect()
    emitter(provider, spans)
    provider.shutdown()
    return percentiles(timed.ns)


def percentiles(ns: list[int]) -> tuple[float, float]:
    ordered = sorted(ns)
    return ordered[len(ordered) // 2] / 1000, ordered[int(len(ordered) * 0.99)] / 1000


def best_of(
    setups: Mapping[str, Sampler | None], spans: int, rounds: int, emitter: Emit = emit
) -> dict[str, tuple[float, float]]:
    """Each setup measured in ``rounds`` interleaved rounds.

    The best round counts, as in overhead.py, so that a busy moment of the machine does not
    decide the ratio.
    """
    rounds_of: dict[str, list[tuple[float, float]]] = {label: [] for label in setups}
    for _ in range(rounds):
        for label, sampler in setups.items():
            rounds_of[label].append(measure_setup(sampler, spans, emitter))
    return {
        label: (min(p50 for p50, _ in measured), min(p99 for _, p99 in measured))
        for label, measured in rounds_of.items()
    }


def print_table(title: str, results: dict[str, tuple[float, float]]) -> None:
    print(f"{title}: per-span processor time on the application thread (on_start + on_end), µs")
    print(f"{'':<34}{'p50':>8}{'p99':>8}")
    for label, (p50, p99) in results.items():
        print(f"{label:<34}{p50:>8.2f}{p99:>8.2f}")


def measure_on_end(spans: int, rounds: int = 5) -> None:
    setups = {
        "BatchSpanProcessor alone": None,
        "evaluation on, span sampled out": Never(),
        "saturated, hanging evaluator": Always(),
    }
    results = best_of(setups, spans, rounds)
    print_table("LLM spans", results)
    sat_p50, sat_p99 = results["saturated, hanging evaluator"]
    for baseline in ("evaluation on, span sampled out", "BatchSpanProcessor alone"):
        base_p50, base_p99 = results[baseline]
        print(
            f"saturated vs {baseline + ':':<32}{sat_p50 / base_p50:>5.2f}x p50"
            f"{sat_p99 / base_p99:>6.2f}x p99"
        )
    print("target: saturated <= 1.2x with no evaluation\n")


def measure_non_llm(spans: int, rounds: int = 5) -> None:
    setups = {"BatchSpanProcessor alone": None, "behind EvaluationProcessor": Always()}
    results = best_of(setups, spans, rounds, emit_plain)
    print_table("spans that are not LLM spans", results)
    (base_p50, base_p99), (p50, p99) = results.values()
    print(f"ratio: {p50 / base_p50:.2f}x p50 {p99 / base_p99:.2f}x p99 (target <= 1.1x)\n")


def measure_openinference(spans: int, rounds: int = 5) -> None:
    setups = {
        "BatchSpanProcessor alone": None,
        "sampled out": Never(),
        "read and queued (saturated)": Always(),
    }
    results = best_of(setups, spans, rounds, emit_openinference)
    print_table("OpenInference traces (chain, retriever, LLM)", results)
    print()


def measure_throughput(spans: int) -> None:
    exporter = DiscardingExporter()
    processor = EvaluationProcessor(
        BatchSpanProcessor(exporter, max_queue_size=spans * 2),
        [SleepingEvaluator(0.05)],
        concurrency=64,
        queue_size=spans,
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    started = time.perf_counter()
    emit(provider, spans)
    assert processor.force_flush(120_000)
    elapsed = time.perf_counter() - started
    provider.shutdown()
    print(
        f"throughput: {spans} evaluations (50 ms each, concurrency 64) in {elapsed:.2f} s = "
        f"{spans / elapsed:.0f} evaluations/s  (target >= 1000/s; ideal {64 / 0.05:.0f}/s)\n"
    )


def measure_memory(spans: int) -> None:
    processor = EvaluationProcessor(
        BatchSpanProcessor(DiscardingExporter()),
        [SleepingEvaluator(None)],
        queue_size=spans,
        drain_seconds=0.1,
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    emit(provider, 10)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    emit(provider, spans)
    time.sleep(0.5)  # let the worker pick every span up
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    provider.shutdown()
    print(f"memory: {held / spans / 1024:.1f} KiB held per queued span ({spans} spans queued)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--spans", type=int, default=20_000)
    args = parser.parse_args()
    measure_on_end(args.spans)
    measure_non_llm(args.spans)
    measure_openinference(args.spans)
    measure_throughput(min(args.spans, 5000))
    measure_memory(2000)


if __name__ == "__main__":
    main()
