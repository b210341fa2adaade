"""Per-call cost of `@tracefact.llm` against a hand-written OpenTelemetry span.

All variants run in one process, interleaved, through the same tracer provider (a
BatchSpanProcessor into an exporter that discards), so the ratios compare like with
like. Both record the same facts: the raw span sets the span kind, the question, the
contexts and the answer by hand; the decorated function gets the contexts as an
argument and records them the same way.

    python benchmarks/overhead.py [--calls 20000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
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
CONTEXTS = ["The Eiffel Tower was completed in 1889.", "It is 330 metres tall."]
ANSWER = "It was completed in 1889."


def bare(question: str, contexts: list[str]) -> str:
    return ANSWER


async def abare(question: str, contexts: list[str]) -> str:
    return ANSWER


def make_variants() -> tuple[dict[str, Call], dict[str, AsyncCall]]:
    tracer = trace.get_tracer("benchmark")

    def raw(question: str, contexts: list[str]) -> str:
        with tracer.start_as_current_span("raw") as span:
            span.set_attribute("openinference.span.kind", "LLM")
            span.set_attribute("input.value", question)
            span.set_attribute("tracefact.contexts", contexts)
            result = bare(question, contexts)
            span.set_attribute("output.value", result)
            return result

    async def araw(question: str, contexts: list[str]) -> str:
        with tracer.start_as_current_span("raw") as span:
            span.set_attribute("openinference.span.kind", "LLM")
            span.set_attribute("input.value", question)
            span.set_attribute("tracefact.contexts", contexts)
            result = await abare(question, contexts)
            span.set_attribute("output.value", result)
            return result

    sync: dict[str, Call] = {
        "undecorated": bare,
        "raw OTel span": raw,
        "@tracefact.llm": tracefact.llm(bare),
    }
    async_: dict[str, AsyncCall] = {
        "undecorated": abare,
        "raw OTel span": araw,
        "@tracefact.llm": tracefact.llm(abare),
    }
    return sync, async_


Call = Callable[[str, list[str]], str]
AsyncCall = Callable[[str, list[str]], Awaitable[str]]


def time_sync(func: Call, calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        func(QUESTION, CONTEXTS)
    return (time.perf_counter_ns() - start) / calls


async def time_async(func: AsyncCall, calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        await func(QUESTION, CONTEXTS)
    return (time.perf_counter_ns() - start) / calls


def run_async(loop: asyncio.AbstractEventLoop, func: AsyncCall, calls: int) -> float:
    """`time_async` run to its end on `loop`: a fresh coroutine each time."""
    return loop.run_until_complete(time_async(func, calls))


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

    # Evaluation off: this measures instrumentation alone (the pipeline has its own benchmark).
    tracefact.configure(
        service_name="overhead-benchmark", exporter=DiscardingExporter(), evaluators=[]
    )
    sync, async_ = make_variants()
    sync_ns = best_of(
        {n: functools.partial(time_sync, f, args.calls) for n, f in sync.items()}, args.repeats
    )
    loop = asyncio.new_event_loop()
    async_ns = best_of(
        {n: functools.partial(run_async, loop, f, args.calls) for n, f in async_.items()},
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
