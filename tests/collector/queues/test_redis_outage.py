"""A Redis outage as operators see it: `/readyz` 503 with the reason, refusals `unavailable`.

A `tracefact collector` on the redis queue, the real redis-server stopped and started
again (its append-only file keeps what was stored). While it is down the collector is
not ready, refuses with a retry hint and counts the refusals apart from a full queue;
once it is back it is ready again and every acknowledged span reaches the upstream.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.collector.harness import wait_until
from tests.collector.queues import processes
from tests.collector.queues.processes import arrivals, send, start, trace_requests
from tests.collector.queues.redis_server import RedisServer
from tests.fakes.otlp import OTLPReceiver
from tracefact import semconv

PROTOBUF = {"Content-Type": "application/x-protobuf"}
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture
def collector(
    tmp_path: Path, upstream: OTLPReceiver, redis_server: RedisServer
) -> Iterator[processes.CollectorProcess]:
    settings = processes.config(
        upstream.endpoint, 0.01, queue="redis", redis={"url": redis_server.url}
    )
    settings["receivers"]["grpc"] = {"host": "127.0.0.1", "port": 0}
    settings["forwarding"]["retry_after_seconds"] = 3
    process = start("collector", tmp_path / "c.yaml", settings)
    yield process
    processes.stop([process])


def rejected(process: processes.CollectorProcess) -> dict[tuple[str, str], float]:
    """`tracefact.collector.requests.rejected` by (protocol, reason), from `/metrics`."""
    text = httpx.get(f"http://127.0.0.1:{process.ports['metrics']}/metrics").text
    name = semconv.METRIC_COLLECTOR_REJECTED.replace(".", "_")
    counts: dict[tuple[str, str], float] = {}
    for labels, value in re.findall(rf"^{name}_total{{([^}}]*)}} ([0-9.e+]+)$", text, re.M):
        pairs = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        counts[(pairs["protocol"], pairs["reason"])] = float(value)
    return counts


def grpc_refusal(process: processes.CollectorProcess, request: ExportTraceServiceRequest) -> Any:
    with grpc.insecure_channel(process.grpc) as channel:
        export = channel.unary_unary(
            EXPORT,
            request_serializer=ExportTraceServiceRequest.SerializeToString,
            response_deserializer=lambda b: b,
        )
        with pytest.raises(grpc.RpcError) as refused:
            export.with_call(request, timeout=10)
    return refused.value


def test_while_redis_is_down_readyz_says_why_and_refusals_count_as_unavailable(
    collector: processes.CollectorProcess, upstream: OTLPReceiver, redis_server: RedisServer
) -> None:
    readyz = f"{collector.http}/readyz"
    assert httpx.get(readyz).json() == {"status": "ready"}
    send(collector, trace_requests(1, together=True))
    redis_server.stop()

    assert wait_until(lambda: httpx.get(readyz).status_code == 503, timeout=10)
    body = httpx.get(readyz).json()
    assert body["status"] == "not ready"
    assert body["reason"].startswith("queue unavailable: redis unreachable")
    [request, _] = trace_requests(2, together=False)
    refused = httpx.post(
        f"{collector.http}/v1/traces", content=request.SerializeToString(), headers=PROTOBUF
    )
    assert refused.status_code == 503  # retryable: the client keeps the spans
    assert refused.headers["Retry-After"] == "3"
    call = grpc_refusal(collector, request)
    assert call.code() == grpc.StatusCode.UNAVAILABLE
    assert "google.rpc.retryinfo-bin" in dict(call.trailing_metadata() or ())
    counts = rejected(collector)
    assert counts == {
        ("http", semconv.REJECT_UNAVAILABLE): 1.0,
        ("grpc", semconv.REJECT_UNAVAILABLE): 1.0,
    }

    redis_server.start()
    assert wait_until(lambda: httpx.get(readyz).status_code == 200, timeout=15)
    assert httpx.get(readyz).json() == {"status": "ready"}
    send(collector, [request])  # the client's retry, now accepted
    expected = {processes.span_id(1, n) for n in (2, 3, 4)}
    expected |= {processes.span_id(2, n) for n in (2, 3)}
    assert wait_until(lambda: set(arrivals(upstream)) == expected, timeout=30)
    assert rejected(collector) == counts  # nothing refused once Redis was back
