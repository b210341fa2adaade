"""Memory and time bounded at the HTTP receiver's door: connections, bytes, deadlines.

One `tracefact collector` with small door limits; every test ends with it still serving.
Black-box: raw sockets and httpx against the port, whichever server is behind it.
"""

from __future__ import annotations

import concurrent.futures
import socket
from collections.abc import Iterator

import httpx
import pytest

from tests.collector.harness import CollectorProcess, base_config, running_collector, wait_until
from tests.collector.test_protection import rejected, valid_request
from tests.fakes.otlp import OTLPReceiver, otlp_receiver
from tracefact import semconv

MAX_BODY = 16 * 1024
MAX_CONNECTIONS = 64
PROTOBUF = {"Content-Type": "application/x-protobuf"}


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[CollectorProcess, OTLPReceiver]]:
    with otlp_receiver() as upstream:
        config = base_config(upstream.endpoint)
        config["limits"] = {
            "max_body_bytes": MAX_BODY,
            "max_bytes_in_flight": MAX_BODY,
            "max_connections": MAX_CONNECTIONS,
            "request_timeout_seconds": 1.5,
        }
        path = tmp_path_factory.mktemp("door") / "tracefact.yaml"
        with running_collector(path, config) as collector:
            yield collector, upstream


def port(collector: CollectorProcess) -> int:
    return int(collector.http.rsplit(":", 1)[1])


def head(length: int) -> bytes:
    return (
        "POST /v1/traces HTTP/1.1\r\nHost: collector\r\n"
        f"Content-Type: application/x-protobuf\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def serving(collector: CollectorProcess) -> bool:
    response = httpx.post(
        f"{collector.http}/v1/traces", content=valid_request(0xD00), headers=PROTOBUF
    )
    return response.status_code == 200


def test_a_burst_of_hundreds_of_clients_is_answered(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    """400 clients at once: each hears 200 or a 503 to retry; none waits until its timeout."""
    collector, _ = served
    body = valid_request(0xB00)

    def post(_: int) -> int:
        try:
            with socket.create_connection(("127.0.0.1", port(collector)), timeout=20) as sock:
                sock.sendall(head(len(body)) + body)
                return int(sock.recv(64).split(b" ")[1])
        except TimeoutError:
            return 0

    with concurrent.futures.ThreadPoolExecutor(400) as pool:
        statuses = list(pool.map(post, range(400)))
    assert set(statuses) <= {200, 503}, sorted(set(statuses))
    assert statuses.count(200) >= MAX_CONNECTIONS
    assert rejected(collector, "http", semconv.REJECT_CONNECTIONS) == statuses.count(503)
    assert serving(collector)


def test_a_request_must_arrive_whole_within_its_deadline(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    """A client trickling its headers a byte at a time is closed, however often it sends."""
    collector, _ = served
    with socket.create_connection(("127.0.0.1", port(collector)), timeout=10) as sock:
        closed = False
        for byte in head(10)[:40]:  # ten seconds of bytes, the request never whole
            try:
                sock.sendall(bytes([byte]))
                sock.settimeout(0.25)  # each byte well within the per-read timeout
                closed = sock.recv(1024) == b""
            except TimeoutError:
                continue
            except OSError:
                closed = True
            if closed:
                break
        assert closed
    assert serving(collector)


def test_bodies_past_the_bytes_in_flight_are_refused_at_once(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    """One client holds the whole budget by sending its body slowly; the next gets 429."""
    collector, _ = served
    body = valid_request(0xB01)
    before = rejected(collector, "http", semconv.REJECT_FULL)
    with socket.create_connection(("127.0.0.1", port(collector)), timeout=10) as slow:
        slow.sendall(head(MAX_BODY))  # its body is still to come: the budget is held

        def refused() -> bool:
            response = httpx.post(f"{collector.http}/v1/traces", content=body, headers=PROTOBUF)
            return response.status_code == 429 and "bytes in flight" in response.text

        assert wait_until(refused, 5)
        assert rejected(collector, "http", semconv.REJECT_FULL) > before
    assert wait_until(lambda: serving(collector))
