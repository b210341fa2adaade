"""Each framework's agent: every final answer is judged on the tool's result.

Through the SDK, the app changed only by `tracefact.configure()`; through the collector,
not at all. Plain and streaming.

The default evaluator judges (the labels are printed, not asserted: a wrong label on
evidence that was read is the evaluator's, not the reader's); the step that only asks for
the tool is skipped as `tool_call`, and the agent's own span, which repeats the answer,
is not judged.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracefact
from tests.collector.deployment import compose_collector
from tests.conftest import reset_global_tracer_provider
from tests.fakes.agents import ANSWERS, CALL_ID, FRAMEWORKS, AgentModel, run_agent
from tests.fakes.instrumentors import DOCUMENT
from tests.fakes.openai_server import API_KEY, fake_openai
from tests.fakes.otlp import otlp_receiver
from tracefact import semconv
from tracefact.collector.spans import attributes as decoded
from tracefact.conventions import span_role

LABEL = semconv.eval_attribute("hallucination", "label")
APP = Path(__file__).resolve().parent / "app.py"
SPANS_PER_RUN = {"pydantic_ai": 4, "openai_agents": 8, "langgraph": 9}


def judged_answer(spans: Iterable[Mapping[str, Any]]) -> tuple[str, str]:
    """One agent run's trace: its final answer judged on the tool's result; (answer, label)."""
    spans = list(spans)
    llm = [s for s in spans if span_role(s) == "llm"]
    step, final = sorted(llm, key=lambda s: s[semconv.EVAL_STATUS] != semconv.STATUS_SKIPPED)
    assert step[semconv.EVAL_SKIP_REASON] == semconv.SKIP_TOOL_CALL, step
    assert final[semconv.EVAL_STATUS] == semconv.STATUS_OK, final
    assert final[semconv.CONTEXTS_SOURCE] == semconv.CONTEXT_SOURCE_TOOL
    assert tuple(final[semconv.CONTEXTS]) == (DOCUMENT,)
    assert tuple(final[semconv.CONTEXTS_TOOL_CALLS]) == (CALL_ID,)
    for span in spans:
        if span_role(span) != "llm":  # tools, agents, chains: as the app made them
            assert not any(key.startswith("tracefact.eval") for key in span), span
    answer = next(name for name, text in ANSWERS.items() if text in str(dict(final)))
    return answer, str(final[LABEL])


def by_trace(spans: Iterable[tuple[int, int, Mapping[str, Any]]]) -> list[list[Mapping[str, Any]]]:
    """(trace id, start time, attributes) grouped by trace, traces in the order they began."""
    traces: dict[int, list[tuple[int, Mapping[str, Any]]]] = {}
    for trace_id, start, values in spans:
        traces.setdefault(trace_id, []).append((start, values))
    ordered = sorted(traces.values(), key=lambda trace: min(start for start, _ in trace))
    return [[values for _, values in trace] for trace in ordered]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
def test_through_the_sdk(name: str, stream: bool) -> None:
    reset_global_tracer_provider()
    exporter = InMemorySpanExporter()
    tracefact.configure(exporter=exporter)  # the one line the app gains
    undo = FRAMEWORKS[name].instrument(None)  # as the app instruments it: the global provider
    try:
        with fake_openai() as server:
            for answer in ANSWERS.values():
                assert run_agent(name, answer, stream, server) == answer
        assert tracefact.force_flush(120_000)
        finished = exporter.get_finished_spans()
        traces = by_trace(
            (s.context.trace_id, s.start_time or 0, s.attributes or {})
            for s in finished
            if s.context is not None
        )
        labels = dict(judged_answer(trace) for trace in traces)
        assert set(labels) == set(ANSWERS)
        print(f"\n[labels] sdk {name} {'stream' if stream else 'plain'}: {labels}")
    finally:
        undo()
        tracefact.shutdown()
        reset_global_tracer_provider()


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
def test_through_the_collector(name: str) -> None:
    """compose.yaml's collector (the default evaluator) between the app and a receiver.

    The app runs its agent four times, plain then streaming, grounded then invented.
    """
    with (
        fake_openai() as server,
        otlp_receiver() as upstream,
        compose_collector(upstream.endpoint) as collector,
    ):
        server.responder = AgentModel([ANSWERS["grounded"], ANSWERS["invented"]])
        env = {
            **os.environ,
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.http,
            "OPENAI_BASE_URL": server.api_base,
            "OPENAI_API_KEY": API_KEY,
        }
        done = subprocess.run(
            [sys.executable, str(APP), name], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        assert upstream.wait_for(4 * SPANS_PER_RUN[name], timeout=120)
    assert collector.process.returncode == 0, "".join(collector.lines)[-3000:]
    assert done.stdout.split("\n")[:4] == [ANSWERS["grounded"], ANSWERS["invented"]] * 2
    traces = by_trace(
        (int.from_bytes(s.trace_id, "big"), s.start_time_unix_nano, decoded(s.attributes))
        for _, s in upstream.spans()
    )
    assert len(traces) == 4 and sum(map(len, traces)) == 4 * SPANS_PER_RUN[name]
    for mode, runs in (("plain", traces[:2]), ("stream", traces[2:])):
        labels = dict(judged_answer(trace) for trace in runs)
        assert set(labels) == set(ANSWERS)
        print(f"\n[labels] collector {name} {mode}: {labels}")
