"""Traffic whose true hallucination rate steps up on cue, served to Prometheus.

The SDK as an application runs it: `tracefact.configure(prometheus_port=...)`, a rule
that evaluates the risky `/refund` route fully and the rest at 25%, and LLM spans made
with the plain OpenTelemetry API. A call is grounded (its answer is in its context) or
not, with the probability of the current phase, read from the control file:

    low   every route 1% hallucinated
    high  /refund 40%, the rest still 1%

The judge is a stand-in for an LLM judge (no network): it finds an answer grounded when
its context contains it, takes a few milliseconds and bills a small cost, so the
dashboard's cost and latency panels have something to show.

    python -m e2e.monitor_demo PORT CONTROL_FILE
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from pathlib import Path

from opentelemetry import trace

import tracefact
from tracefact import semconv
from tracefact.evaluators.base import EvalCase, EvalResult, EvaluatorDescription
from tracefact.sampling import Always, Ratio, Rule

CALLS_PER_SECOND = 50
RISKY = "/refund"
RATES = {"low": {RISKY: 0.01, "/faq": 0.01}, "high": {RISKY: 0.40, "/faq": 0.01}}
CONTEXT = "Refunds are paid within 14 days of the return reaching the warehouse."


class ContainmentJudge:
    """Grounded when the context holds the answer; a fixed cost and a short wait per call."""

    name = "hallucination"

    def describe(self) -> EvaluatorDescription:
        return EvaluatorDescription(name=self.name, evaluator="e2e-containment", source="llm")

    async def evaluate(self, case: EvalCase) -> EvalResult:
        await asyncio.sleep(random.uniform(0.002, 0.01))
        grounded = any(case.output in context for context in case.contexts)
        return EvalResult(
            name=self.name,
            label="factual" if grounded else "hallucinated",
            score=0.0 if grounded else 1.0,
            explanation="the context states it" if grounded else "not in the context",
            evaluator="e2e-containment",
            cost_usd=0.0002,
            annotator_kind="LLM",
        )


def main(port: int, control: Path) -> None:
    tracefact.configure(
        service_name="support-bot",
        exporter="none",
        evaluators=[ContainmentJudge()],
        sampler=Rule({"http.route": RISKY}, then=Always()) | Ratio(0.25),
        prometheus_port=port,
        monitor_group_by=["service", "model", "route"],
        monitor_window_seconds=30,
    )
    tracer = trace.get_tracer("e2e.monitor_demo")
    phase, read_at = "low", 0.0
    while True:
        if time.monotonic() - read_at > 0.5:
            phase, read_at = control.read_text().strip() or phase, time.monotonic()
        route = RISKY if random.random() < 0.2 else "/faq"
        hallucinated = random.random() < RATES[phase][route]
        answer = "Refunds are paid at once, in cash." if hallucinated else "within 14 days"
        attributes = {
            semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_LLM,
            semconv.LLM_MODEL_NAME: "small-model",
            semconv.INPUT_VALUE: "When is my refund paid?",
            semconv.CONTEXTS: [CONTEXT],
            "http.route": route,
        }
        with tracer.start_as_current_span("answer", attributes=attributes) as span:
            span.set_attribute(semconv.OUTPUT_VALUE, answer)
        time.sleep(1 / CALLS_PER_SECOND)


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]))
