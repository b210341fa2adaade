"""Per-call cost of `@tracefact.llm` against a hand-written OpenTelemetry span.

All variants run in one process, interleaved, through the same tracer provider (a
BatchSpanProcessor into an exporter that discards), so the ratios compare like with
like. The raw span sets the same three attributes a minimal LLM span needs:
span kind, input and output.

    python benchmarks/overhead.py [--calls 20000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from collections.abc import Awaitable, Callable, Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import tracefact


class DiscardingExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "It was completed in 1889."


def bare(question: str) -> str:
    return ANSWER


async def abare(question: str) -> str:
    return ANSWER


def make_variants() -> tuple[
    dict[str, Callable[[str], str]], dict[str, Callable[[str], Awaitable[str]]]
]:
    tracer = trace.get_tracer("benchmark")

    def raw(question: str) -> str:
        with tracer.start_as_current_span("raw") as span:
            span.set_attribute("openinference.span.kind", "LLM")
            span.set_attribute("input.value", question)
            result = bare(question)
            span.set_attribute("output.value", result)
            return result

    async def araw(question: str) -> str:
        with tracer.start_as_current_span("raw") as span:
            span.set_attribute("openinference.span.kind", "LLM")
            span.set_attribute("input.value", question)
            result = await abare(question)
            span.set_attribute("output.value", result)
            return result

    sync = {"undecorated": bare, "raw OTel span": raw, "@tracefact.llm": tracefact.llm(bare)}
    async_ = {"undecorated": abare, "raw OTel span": araw, "@tracefact.llm": tracefact.llm(abare)}
    return sync, async_


def time_sync(func: Callable[[str], str], calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        func(QUESTION)
    return (time.perf_counter_ns() - start) / calls


async def time_async(func: Callable[[str], Awaitable[str]], calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        await func(QUESTION)
    return (time.perf_counter_ns() - start) / calls


def best_of(variants: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """Interleave the variants and keep each one's fastest run (least disturbed)."""
    best = {name: float("inf") for name in variants}
    for _ in range(repeats):
        for name, run in variants.items():
            gc.collect()
            best[name] = min(best[name], run())
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    tracefact.configure(service_name="overhead-benchmark", exporter=DiscardingExporter())
    sync, async_ = make_variants()
    sync_ns = best_of(
        {n: (lambda f=f: time_sync(f, args.calls)) for n, f in sync.items()}, args.repeats
    )
    loop = asyncio.new_event_loop()
    async_ns = best_of(
        {
            n: (lambda f=f: loop.run_until_complete(time_async(f, args.calls)))
            for n, f in async_.items()
        },
        args.repeats,
    )
    loop.close()
    tracefact.shutdown()

    print(f"{args.calls} calls x {args.repeats} runs, best run per variant, ns per call\n")
    print(f"{'variant':<18}{'sync ns':>10}{'vs raw':>9}{'async ns':>11}{'vs raw':>9}")
    for name in sync:
        print(
            f"{name:<18}{sync_ns[name]:>10.0f}{sync_ns[name] / sync_ns['raw OTel span']:>8.2f}x"
            f"{async_ns[name]:>11.0f}{async_ns[name] / async_ns['raw OTel span']:>8.2f}x"
        )
    print("\ntarget: @tracefact.llm <= 1.15x the raw OTel span")


if __name__ == "__main__":
    main()
