"""Every refused or failed gRPC export is answered with a clear status and counted.

A collector in process (its receivers on 127.0.0.1), a real gRPC client, /metrics read
over HTTP: a message over the body limit at any size (gRPC itself refuses one over its
limit, which the servicer sees), a malformed one, and an unexpected error (a queue whose
`put` raises) answered INTERNAL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest

from tests.collector.harness import base_config, wait_until
from tests.fakes.otlp import OTLPReceiver, otlp_receiver
from tracefact import semconv
from tracefact.collector.config import CollectorConfig
from tracefact.collector.service import Collector

MAX_BODY = 16 * 1024
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture
def upstream() -> Iterator[OTLPReceiver]:
    with otlp_receiver() as receiver:
        yield receiver


@pytest.fixture
def collector(upstream: OTLPReceiver) -> Iterator[tuple[Collector, dict[str, int]]]:
    settings: dict[str, Any] = base_config(upstream.endpoint, enabled=False)
    settings["limits"] = {"max_body_bytes": MAX_BODY}
    service = Collector(CollectorConfig.model_validate(settings))
    ports = service.start()
    try:
        yield service, ports
    finally:
        service.shutdown()


def rejected(ports: dict[str, int], reason: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{ports['http']}/metrics").text
    name = semconv.METRIC_COLLECTOR_REJECTED.replace(".", "_")
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(f"{name}_total{{")
        and 'protocol="grpc"' in line
        and f'reason="{reason}"' in line
    )


def export(ports: dict[str, int], body: bytes) -> grpc.RpcError:
    """The error a unary Export of `body` gets."""
    with grpc.insecure_channel(f"127.0.0.1:{ports['grpc']}") as channel:
        call = channel.unary_unary(
            EXPORT, request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        with pytest.raises(grpc.RpcError) as error:
            call(body, timeout=10)
    return error.value


@pytest.mark.parametrize("size", [MAX_BODY + 1, 2 * MAX_BODY + 1, 64 * MAX_BODY])
def test_a_message_over_the_body_limit_is_resource_exhausted_and_counted(
    collector: tuple[Collector, dict[str, int]], size: int
) -> None:
    _, ports = collector
    before = rejected(ports, semconv.REJECT_TOO_LARGE)
    error = export(ports, b"\x00" * size)
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert wait_until(lambda: rejected(ports, semconv.REJECT_TOO_LARGE) == before + 1)


def test_a_malformed_message_is_invalid_argument_and_counted(
    collector: tuple[Collector, dict[str, int]],
) -> None:
    _, ports = collector
    before = rejected(ports, semconv.REJECT_MALFORMED)
    error = export(ports, b"\x0b" * 4096)  # a group's tag: no OTLP message has one
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "bad protobuf" in (error.details() or "")
    assert rejected(ports, semconv.REJECT_MALFORMED) == before + 1


def test_an_unexpected_error_is_internal_logged_and_counted(
    collector: tuple[Collector, dict[str, int]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    service, ports = collector

    def broken(request: object) -> None:
        raise RuntimeError("a bug in the queue")

    monkeypatch.setattr(service.queue, "put", broken)
    before = rejected(ports, semconv.REJECT_INTERNAL)
    body = bytes.fromhex("0a0412021200")  # one resource, one scope, one empty span
    error = export(ports, body)
    assert error.code() == grpc.StatusCode.INTERNAL
    assert error.details() == "internal error: RuntimeError"
    assert rejected(ports, semconv.REJECT_INTERNAL) == before + 1
    assert any(record.message == "request failed" for record in caplog.records)
