"""Results to hand to sinks directly, and fast delivery timings for tests."""

from __future__ import annotations

import random
import socket
from typing import Any

from opentelemetry.trace import SpanContext, TraceFlags

from tracefact.evaluators.base import EvalResult
from tracefact.sinks import EvaluatedSpan

FAST: dict[str, Any] = {
    "schedule_delay_seconds": 0.02,
    "backoff_seconds": 0.01,
    "max_backoff_seconds": 0.05,
}


def evaluated(label: str = "hallucinated", annotator_kind: str = "CODE") -> EvaluatedSpan:
    context = SpanContext(
        trace_id=random.getrandbits(128),
        span_id=random.getrandbits(64),
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    result = EvalResult(
        name="hallucination",
        label=label,  # type: ignore[arg-type]
        score=0.9 if label == "hallucinated" else 0.1,
        explanation=f"because {label}",
        unsupported=["Paris is in Spain."] if label == "hallucinated" else [],
        evaluator="judge(gpt-test)",
        annotator_kind=annotator_kind,  # type: ignore[arg-type]
    )
    return EvaluatedSpan(context, "generate", result)


def closed_port_url() -> str:
    """A local URL where nothing listens: every request fails to connect."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
