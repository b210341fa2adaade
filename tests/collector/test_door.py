"""Memory and time bounded at the HTTP receiver's door: connections, bytes, deadlines.

One `tracefact collector` with small door limits; every test ends with it still serving.
Black-box: raw sockets and httpx against the port, whichever server is behind it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import socket
import tracemalloc
from collections.abc import Iterator

import httpx
import pytest

from tests.collector.harness import CollectorProcess, base_config, running_collector, wait_until
from tests.collector.test_protection import rejected, valid_request
from tests.fakes.otlp import OTLPReceiver, otlp_receiver
from tracefact import semconv
from tracefact.collector.decode import json_cost

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


JSON = {"Content-Type": "application/json"}


def test_json_whose_parse_could_not_fit_the_bytes_in_flight_is_a_counted_413(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    """16 KiB of empty attributes parse to 5,000 objects: refused unparsed; one span is not."""
    collector, upstream = served
    head_, tail = b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[', b"]}]}]}]}"
    body = head_ + b",".join([b"{}"] * ((MAX_BODY - 100) // 3)) + tail
    before = rejected(collector, "http", semconv.REJECT_TOO_LARGE)
    response = httpx.post(f"{collector.http}/v1/traces", content=body, headers=JSON)
    assert response.status_code == 413 and "too large to parse" in response.text
    assert rejected(collector, "http", semconv.REJECT_TOO_LARGE) == before + 1
    span = {"traceId": "0b" * 16, "spanId": "0c" * 8, "name": "GET /", "kind": 2}
    small = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
    response = httpx.post(f"{collector.http}/v1/traces", content=small, headers=JSON)
    assert response.status_code == 200, response.text
    assert wait_until(lambda: any(s.span_id == bytes([0x0C] * 8) for _, s in upstream.spans()))


def _wide(count: int) -> bytes:
    """Strings of ASCII with one character past the BMP: four bytes a character parsed."""
    return json.dumps(["\U0001f600" + "a" * 200] * count, ensure_ascii=False).encode()


@pytest.mark.parametrize(
    "body",
    [
        b"[" + b",".join([b"{}"] * 20_000) + b"]",
        b"[" + b",".join([b"[[]]"] * 20_000) + b"]",
        b"[" + b",".join(b'{"%06x":1.5}' % i for i in range(20_000)) + b"]",
        b"{" + b",".join(b'"%06x":"%06x"' % (i, i) for i in range(20_000)) + b"}",
        _wide(1_000),
        json.dumps(["\U0001f600" + "a" * 200] * 1_000).encode(),  # the same, escaped
    ],
    ids=["empty-objects", "nested-arrays", "distinct-keys", "strings", "wide", "escaped"],
)
def test_json_cost_bounds_what_the_parse_allocates(body: bytes) -> None:
    tracemalloc.start()
    try:
        document = json.loads(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert document
    assert peak <= json_cost(body), (peak, json_cost(body))


def _reply(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One reply off `sock`: status, headers (lower-cased names), body by Content-Length."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.lower()] = value.strip()
    body = rest
    while len(body) < int(headers.get("content-length", "0")):
        body += sock.recv(65536)
    return int(lines[0].split(" ")[1]), headers, body


def test_one_connection_carries_requests_in_turn_and_a_body_waits_for_its_continue(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    """Keep-alive, `Expect: 100-continue`, HTTP/1.0 closing, an unsupported method."""
    collector, upstream = served
    body = valid_request(0xD01)
    with socket.create_connection(("127.0.0.1", port(collector)), timeout=10) as sock:
        expecting = head(len(body)).replace(b"\r\n\r\n", b"\r\nExpect: 100-continue\r\n\r\n")
        sock.sendall(expecting)
        assert sock.recv(64) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        status, headers, _ = _reply(sock)
        assert status == 200 and "connection" not in headers
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: collector\r\n\r\n")
        assert _reply(sock)[0] == 200
        sock.sendall(b"DELETE /v1/traces HTTP/1.1\r\nHost: collector\r\n\r\n")
        status, headers, _ = _reply(sock)
        assert (status, headers["connection"]) == (501, "close")
        assert sock.recv(64) == b""
    with socket.create_connection(("127.0.0.1", port(collector)), timeout=10) as sock:
        sock.sendall(b"GET /readyz HTTP/1.0\r\n\r\n")
        status, headers, reply = _reply(sock)
        assert (status, headers["connection"]) == (200, "close")
        assert json.loads(reply) == {"status": "ready"}
        assert sock.recv(64) == b""
    key = (0xD01).to_bytes(16, "big")
    assert wait_until(lambda: any(s.trace_id == key for _, s in upstream.spans()))


@pytest.mark.parametrize(
    ("request_", "status", "reason"),
    [
        (b"NONSENSE\r\n\r\n", 400, semconv.REJECT_MALFORMED),
        (b"POST /v1/traces HTTP/1.1\r\nno colon here\r\n\r\n", 400, semconv.REJECT_MALFORMED),
        (
            b"POST /v1/traces HTTP/1.1\r\n" + b"X-Filler: 1\r\n" * 101 + b"\r\n",
            431,
            semconv.REJECT_TOO_LARGE,
        ),
        (b"DELETE /v1/traces HTTP/1.1\r\nHost: collector\r\n\r\n", 501, semconv.REJECT_METHOD),
        (
            b"POST /v1/logs HTTP/1.1\r\nHost: collector\r\nContent-Length: 2\r\n\r\n{}",
            404,
            semconv.REJECT_PATH,
        ),
    ],
    ids=["request-line", "header-line", "too-many-headers", "method", "path"],
)
def test_requests_that_are_not_otlp_exports_are_answered_and_counted(
    served: tuple[CollectorProcess, OTLPReceiver], request_: bytes, status: int, reason: str
) -> None:
    """What an operator needs to see an exporter misconfigured: each refusal by its reason."""
    collector, _ = served
    before = rejected(collector, "http", reason)
    with socket.create_connection(("127.0.0.1", port(collector)), timeout=10) as sock:
        sock.sendall(request_)
        assert _reply(sock)[0] == status
    assert rejected(collector, "http", reason) == before + 1
    assert serving(collector)


def test_a_body_not_whole_within_the_deadline_is_a_counted_408(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    collector, _ = served
    before = rejected(collector, "http", semconv.REJECT_TIMEOUT)
    with socket.create_connection(("127.0.0.1", port(collector)), timeout=10) as sock:
        sock.sendall(head(100) + b"only part of it")
        reply = sock.recv(1024)
    assert reply.startswith(b"HTTP/1.1 408 ")
    assert wait_until(lambda: rejected(collector, "http", semconv.REJECT_TIMEOUT) == before + 1)
    assert serving(collector)


def test_a_client_that_does_not_read_its_replies_is_cut_at_the_deadline(
    served: tuple[CollectorProcess, OTLPReceiver],
) -> None:
    """Replies it leaves unread fill the socket: the connection may not wait on it forever."""
    collector, _ = served
    before = rejected(collector, "http", semconv.REJECT_TIMEOUT)
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port(collector)))
        sock.settimeout(10)
        requests = b"GET /metrics HTTP/1.1\r\nHost: collector\r\n\r\n" * 2000
        with contextlib.suppress(OSError):  # cut while sending: what the test waits for
            sock.sendall(requests)
        assert wait_until(
            lambda: rejected(collector, "http", semconv.REJECT_TIMEOUT) >= before + 1, 15
        )
    assert serving(collector)
