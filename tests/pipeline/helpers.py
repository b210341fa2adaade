"""A tracer provider wired to an EvaluationProcessor, and evaluators that misbehave on cue."""

from __future__ import annotations

import asyncio
import builtins
import threading
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from tracefact import semconv
from tracefact.evaluators.base import (
    EvalCase,
    EvalResult,
    EvaluatorDescription,
    ProviderError,
    RateLimitError,
)
from tracefact.pipeline import EvaluationProcessor


class ScriptedEvaluator:
    """Behaves as the answer says.

    'ok', 'hallucinated', 'slow:<s>', 'hang', 'error', 'flaky:<n>' (n transient failures, then ok),
    'ratelimit', 'garbage', and, uncooperative: 'raise:<Name>' (a builtin or asyncio exception
    type, BaseExceptions included), 'busy:<s>' (holds the event loop for s seconds, as CPU
    work in `evaluate` would), 'block' (blocks the event loop until `gate` is set),
    'swallow' (ignores cancellation until `gate` is set), 'thread' (waits in a thread until
    `gate` is set).
    """

    def __init__(self, name: str = "hallucination", cost: float | None = None) -> None:
        self.name = name
        self.cost = cost
        self.calls = 0
        self._failures: dict[str, int] = {}
        self._lock = threading.Lock()
        self.gate = threading.Event()
        """Releases 'block', 'swallow' and 'thread'; set it before the test ends."""

    def describe(self) -> EvaluatorDescription:
        return EvaluatorDescription(name=self.name, evaluator="scripted")

    async def evaluate(self, case: EvalCase) -> EvalResult:
        with self._lock:
            self.calls += 1
        command, _, argument = case.output.partition(":")
        if command == "slow":
            await asyncio.sleep(float(argument))
        elif command == "hang":
            await asyncio.Event().wait()
        elif command == "error":
            raise ProviderError("bad request", status_code=400)
        elif command == "ratelimit":
            raise RateLimitError("slow down", retry_after=0.0)
        elif command == "flaky":
            with self._lock:
                seen = self._failures.get(case.input, 0)
                self._failures[case.input] = seen + 1
            if seen < int(argument):
                raise ProviderError("503 unavailable", status_code=503, transient=True)
        elif command == "raise":
            raise (getattr(builtins, argument, None) or getattr(asyncio, argument))()
        elif command == "busy":
            time.sleep(float(argument))  # the event loop is held, then free again
        elif command == "block":
            self.gate.wait()  # the event loop is stuck here, as with time.sleep
        elif command == "swallow":
            while not self.gate.is_set():
                try:
                    await asyncio.sleep(0.01)
                except asyncio.CancelledError:
                    continue
        elif command == "thread":
            await asyncio.to_thread(self.gate.wait)
        elif command == "garbage":
            return "not a result"  # type: ignore[return-value]
        hallucinated = command == "hallucinated"
        return EvalResult(
            name=self.name,
            label="hallucinated" if hallucinated else "factual",
            score=0.9 if hallucinated else 0.1,
            explanation=f"scripted {command}",
            unsupported=[case.output] if hallucinated else [],
            evaluator=f"scripted/{self.name}",
            cost_usd=self.cost,
        )


class Pipeline:
    """Spans in through a real tracer; `originals` as they ended, `exported` after ours."""

    def __init__(self, evaluators: Sequence[Any] | None = None, **options: Any) -> None:
        self.originals = InMemorySpanExporter()
        self.exporter = InMemorySpanExporter()
        self.evaluators = list(evaluators) if evaluators is not None else [ScriptedEvaluator()]
        self.processor = EvaluationProcessor(
            SimpleSpanProcessor(self.exporter), self.evaluators, **options
        )
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.originals))
        self.provider.add_span_processor(self.processor)
        self.tracer: Tracer = self.provider.get_tracer("tests")

    def llm_span(
        self,
        output: str | None = "ok",
        contexts: Sequence[str] | None = ("the context",),
        question: str = "q",
        name: str = "llm",
        **attributes: Any,
    ) -> ReadableSpan:
        """One ended LLM span, as instrumentation would record it."""
        start: dict[str, Any] = {
            semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_LLM,
            semconv.INPUT_VALUE: question,
            **attributes,
        }
        with self.tracer.start_as_current_span(name, attributes=start) as span:
            if output is not None:
                span.set_attribute(semconv.OUTPUT_VALUE, output)
            if contexts is not None:
                span.set_attribute(semconv.CONTEXTS, list(contexts))
            span.add_event("generated")
        return self.originals.get_finished_spans()[-1]

    def exported(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def flush(self, seconds: float = 10.0) -> bool:
        return self.processor.force_flush(int(seconds * 1000))

    def close(self) -> None:
        self.provider.shutdown()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def evaluated_copies(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """Exported spans that are not carrier (EVALUATOR) spans."""
    return [s for s in spans if s.attributes.get(semconv.OPENINFERENCE_SPAN_KIND) != "EVALUATOR"]


def carriers(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    return [s for s in spans if s.attributes.get(semconv.OPENINFERENCE_SPAN_KIND) == "EVALUATOR"]
