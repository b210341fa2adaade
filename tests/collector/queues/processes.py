"""Collectors and workers as users run them, on a durable queue, for crash tests.

`tracefact collector` / `tracefact worker` subprocesses (the harness's `CollectorProcess`),
a waiting evaluator imported by spec, and traces sent as OTLP/HTTP protobuf requests whose
200 is the acknowledgement the crash tests hold the collector to.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from tests.collector.harness import TRACEFACT, CollectorProcess, attributes, write_config
from tests.collector.queues.redis_server import RedisServer
from tests.fakes.otlp import OTLPReceiver
from tracefact import semconv

ROOT = Path(__file__).resolve().parents[3]
WAITING = "tests.collector.queues.waiting:WaitingEvaluator"


def config(
    upstream: str,
    evaluation_seconds: float,
    queue_size: int = 1024,
    window_seconds: float = 0.5,
    **queue: Any,
) -> dict[str, Any]:
    """HTTP receiver and metrics on free ports, a waiting evaluator, the given queue keys.

    `queue_size` is also what a consumer of a durable queue takes at most.
    """
    return {
        "receivers": {"http": {"host": "127.0.0.1", "port": 0}, "grpc": None},
        "upstreams": [{"endpoint": upstream}],
        "forwarding": {"retry_base_seconds": 0.05, "retry_max_seconds": 0.2},
        "evaluation": {
            "evaluators": [{"import": WAITING, "kwargs": {"seconds": evaluation_seconds}}],
            "window_seconds": window_seconds,
            "timeout_seconds": 120,
            "max_hold_seconds": 120,
            "drain_seconds": 1,
            "queue_size": queue_size,
        },
        "metrics": {"host": "127.0.0.1", "port": 0},
        "logging": {"level": "info"},
        "drain_seconds": 5,
        **queue,
    }


def start(command: str, path: Path, settings: dict[str, Any]) -> CollectorProcess:
    """`tracefact collector|worker --config path`, from the repository root, once listening."""
    write_config(path, settings)
    process = subprocess.Popen(
        [str(TRACEFACT), command, "--config", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    started = CollectorProcess(process)
    started.wait_listening()
    return started


def kill(process: CollectorProcess) -> None:
    """SIGKILL (kill -9): no drain, no acknowledgement, leases left to run out."""
    process.process.kill()
    process.process.wait(10)


def stop(processes: Iterable[CollectorProcess]) -> None:
    """SIGTERM what still runs (a drained exit), reap what was killed, close their pipes."""
    for process in processes:
        if process.process.poll() is None:
            process.terminate()
        process.process.wait(10)
        process._reader.join(5)  # it reads stderr until EOF
        if process.process.stderr is not None:
            process.process.stderr.close()


def counter(process: CollectorProcess, name: str) -> float:
    """A counter's value on the process's /metrics (0 when not yet counted)."""
    return _metric(process, name.replace(".", "_") + "_total")


def gauge(process: CollectorProcess, name: str) -> float:
    """A gauge's value on the process's /metrics (0 when absent)."""
    return _metric(process, name.replace(".", "_"))


def _metric(process: CollectorProcess, sample: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{process.ports['metrics']}/metrics").text
    values = re.findall(rf"^{sample}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.MULTILINE)
    return sum(float(v) for v in values)


def _span(trace: int, number: int, name: str, parent: int | None, **attrs: str) -> Span:
    return Span(
        trace_id=trace.to_bytes(16, "big"),
        span_id=(trace * 16 + number).to_bytes(8, "big"),
        parent_span_id=(trace * 16 + parent).to_bytes(8, "big") if parent else b"",
        name=name,
        start_time_unix_nano=1_700_000_000_000_000_000,
        end_time_unix_nano=1_700_000_001_000_000_000,
        attributes=[KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attrs.items()],
    )


def _request(*spans: Span) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=list(spans))])]
    )


def trace_requests(trace: int, together: bool) -> list[ExportTraceServiceRequest]:
    """One RAG trace: an LLM span with a plain child, and the retriever span that grounds it.

    `together`: one request; otherwise the LLM span's request first and the retriever's
    second, so only a window and a shared document store can bring them together.
    """
    llm = _span(
        trace,
        2,
        "chat",
        1,
        **{
            semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_LLM,
            semconv.INPUT_VALUE: f"What is fact {trace}?",
            semconv.OUTPUT_VALUE: f"Fact {trace} is that the sky is blue.",
        },
    )
    child = _span(trace, 3, "tool", 2)
    retriever = _span(
        trace,
        4,
        "search",
        1,
        **{
            semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_RETRIEVER,
            semconv.retrieval_document(0, semconv.DOCUMENT_CONTENT): f"Fact {trace}: blue sky.",
        },
    )
    if together:
        return [_request(retriever, llm, child)]
    return [_request(llm, child), _request(retriever)]


SPANS_PER_TRACE = 3
LLM_SPAN = 2


def send(process: CollectorProcess, requests: Iterable[ExportTraceServiceRequest]) -> None:
    """POST each request; every one must be acknowledged (200): the collector owns it then."""
    with httpx.Client(base_url=process.http) as client:
        for request in requests:
            response = client.post(
                "/v1/traces",
                content=request.SerializeToString(),
                headers={"Content-Type": "application/x-protobuf"},
            )
            assert response.status_code == 200, response.text


def arrivals(upstream: OTLPReceiver) -> Counter[bytes]:
    """How many times each span id reached the upstream."""
    return Counter(span.span_id for _, span in upstream.spans())


def llm_statuses(upstream: OTLPReceiver) -> dict[bytes, list[str]]:
    """Every LLM span's evaluation status, per arrival, and its evaluator's explanation."""
    out: dict[bytes, list[str]] = {}
    for _, span in upstream.spans():
        values = attributes(span)
        if values.get(semconv.OPENINFERENCE_SPAN_KIND) == semconv.KIND_LLM:
            status = str(values.get(semconv.EVAL_STATUS))
            explanation = values.get(semconv.eval_attribute("hallucination", "explanation"))
            out.setdefault(span.span_id, []).append(f"{status}: {explanation}")
    return out


def span_id(trace: int, number: int) -> bytes:
    return (trace * 16 + number).to_bytes(8, "big")


def sent_ids(traces: range) -> set[bytes]:
    """The ids of the three spans `trace_requests` sends per trace."""
    return {span_id(t, n) for t in traces for n in (2, 3, 4)}


def redis_keys(
    server: RedisServer, consume: bool = True, lease_seconds: float = 1
) -> dict[str, Any]:
    """`queue: redis` on `server`; a short claim time moves a dead consumer's entries on."""
    settings = {"url": server.url, "lease_seconds": lease_seconds, "consume": consume}
    return {"queue": "redis", "redis": settings}


def sqlite_keys(path: Path, lease_seconds: float = 1) -> dict[str, Any]:
    """`queue: sqlite` in `path`'s folder; a short lease moves a dead consumer's entries on."""
    settings = {"path": str(path / "queue.db"), "lease_seconds": lease_seconds}
    return {"queue": "sqlite", "sqlite": settings}


def assert_evaluated_once(upstream: OTLPReceiver, traces: range) -> None:
    """Each trace's LLM span arrived once, evaluated with its retriever's document."""
    statuses = llm_statuses(upstream)
    for trace in traces:
        assert statuses[span_id(trace, LLM_SPAN)] == ["ok: 1 contexts"], trace
