"""Posting to an OTLP/HTTP upstream: h11 on a socket of its own where nothing is in the way.

Real servers on 127.0.0.1 that answer with scripted bytes, so the framings and
connection behaviours httpx handled (chunked replies, a connection closed by the
upstream, Retry-After, partial success, a proxy) are each seen through `export`.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tests.collector.harness import wait_until
from tracefact._retry import Attempt
from tracefact.collector.config import Upstream
from tracefact.collector.upstream_http import HttpUpstream

BODY = b"\x0a\x00" * 10  # what is posted; the servers below do not parse it


def _read_request(connection: socket.socket, buffer: bytearray) -> bytes | None:
    """One request's head and Content-Length body off `connection`; None once it closed."""
    while b"\r\n\r\n" not in buffer:
        data = connection.recv(65536)
        if not data:
            return None
        buffer += data
    end = buffer.index(b"\r\n\r\n") + 4
    head = bytes(buffer[:end])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    while len(buffer) < end + length:
        buffer += connection.recv(65536)
    del buffer[: end + length]
    return head


@contextmanager
def scripted(
    replies: Callable[[int], bytes | None], *, close: bool = False
) -> Iterator[tuple[str, list[bytes], list[int]]]:
    """A server answering its n-th request with `replies(n)` (None: no answer, held open).

    A reply with a `Connection: close` header, or any reply where `close`, has its
    connection closed after it. Yields the base URL, the request heads it read and, once
    each connection closed, the number of requests it had served.
    """
    listener = socket.create_server(("127.0.0.1", 0))
    heads: list[bytes] = []
    closed: list[int] = []

    def serve(connection: socket.socket) -> None:
        buffer = bytearray()
        with connection:
            while (head := _read_request(connection, buffer)) is not None:
                heads.append(head)
                reply = replies(len(heads))
                if reply is None:
                    connection.recv(1)  # until the client goes away
                    break
                connection.sendall(reply)
                if close or b"Connection: close" in reply.split(b"\r\n\r\n")[0]:
                    break
        closed.append(len(heads))

    def accept() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", heads, closed
    finally:
        listener.close()


def reply(status: str, body: bytes = b"", *headers: str) -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_posts_reuse_one_connection_and_carry_the_upstreams_headers() -> None:
    with scripted(lambda n: reply("200 OK")) as (url, heads, _):
        upstream = HttpUpstream(Upstream(endpoint=url, headers={"X-Team": "search"}))
        try:
            assert all(upstream.export(BODY, 5).ok for _ in range(3))
        finally:
            upstream.close()
    assert len(heads) == 3
    first = heads[0].decode()
    assert first.startswith("POST /v1/traces HTTP/1.1\r\n")
    assert "X-Team: search" in first and "Content-Type: application/x-protobuf" in first
    assert f"Content-Length: {len(BODY)}" in first


@pytest.mark.parametrize("said", [True, False], ids=["said", "unsaid"])
def test_a_connection_the_upstream_closed_is_replaced(said: bool) -> None:
    """The upstream closes after every reply, said or not: each post still arrives."""
    headers = ["Connection: close"] if said else []
    with scripted(lambda n: reply("200 OK", b"", *headers), close=True) as (url, _, closed):
        upstream = HttpUpstream(Upstream(endpoint=url))
        try:
            for count in range(1, 4):
                assert upstream.export(BODY, 5).ok
                assert wait_until(lambda n=count: len(closed) == n)  # the upstream closed it
        finally:
            upstream.close()


def test_a_chunked_partial_success_is_read() -> None:
    partial = ExportTraceServiceResponse()
    partial.partial_success.rejected_spans = 2
    partial.partial_success.error_message = "too old"
    payload = partial.SerializeToString()
    chunked = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
        + b"%x\r\n" % 3
        + payload[:3]
        + b"\r\n"
        + b"%x\r\n" % (len(payload) - 3)
        + payload[3:]
        + b"\r\n0\r\n\r\n"
    )
    with scripted(lambda n: chunked) as (url, _, _):
        upstream = HttpUpstream(Upstream(endpoint=url))
        try:
            attempt = upstream.export(BODY, 5)
            assert upstream.export(BODY, 5).rejected == 2  # the connection is reused after it
        finally:
            upstream.close()
    assert attempt.ok and attempt.rejected == 2
    assert "too old" in attempt.error


def test_a_transient_refusal_carries_its_retry_after_and_a_bad_request_is_final() -> None:
    replies = {1: reply("503 Service Unavailable", b"busy", "Retry-After: 7"), 2: reply("400 Bad")}
    with scripted(replies.__getitem__) as (url, _, _):
        upstream = HttpUpstream(Upstream(endpoint=url))
        try:
            busy, bad = upstream.export(BODY, 5), upstream.export(BODY, 5)
        finally:
            upstream.close()
    assert (busy.ok, busy.transient, busy.retry_after) == (False, True, 7.0)
    assert "HTTP 503" in busy.error and "busy" in busy.error
    assert (bad.ok, bad.transient) == (False, False)


def test_an_upstream_that_is_down_is_a_transient_failure() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    upstream = HttpUpstream(Upstream(endpoint=f"http://127.0.0.1:{port}"))
    attempt = upstream.export(BODY, 5)
    upstream.close()
    assert (attempt.ok, attempt.transient) == (False, True)


def test_an_upstream_that_cuts_its_reply_short_is_a_transient_failure() -> None:
    cut = b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\nConnection: close\r\n\r\nshort"
    with scripted(lambda n: cut if n == 1 else reply("200 OK")) as (url, _, _):
        upstream = HttpUpstream(Upstream(endpoint=url))
        try:
            first, second = upstream.export(BODY, 5), upstream.export(BODY, 5)
        finally:
            upstream.close()
    assert (first.ok, first.transient) == (False, True)
    assert second.ok


def test_close_from_another_thread_ends_a_post_under_way() -> None:
    """The drain deadline passed: the post waiting for a reply fails, not at its timeout."""
    with scripted(lambda n: None) as (url, heads, _):
        upstream = HttpUpstream(Upstream(endpoint=url))
        outcome: list[Attempt] = []
        post = threading.Thread(target=lambda: outcome.append(upstream.export(BODY, 600)))
        post.start()
        assert wait_until(lambda: bool(heads))  # the request arrived: the post waits
        upstream.close()
        post.join()
    (attempt,) = outcome
    assert (attempt.ok, attempt.transient) == (False, True)
    assert "timed out" not in attempt.error


def test_a_proxy_variable_sends_the_post_through_the_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with scripted(lambda n: reply("200 OK")) as (proxy, heads, _):
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        upstream = HttpUpstream(Upstream(endpoint="http://backend.invalid:4318"))
        try:
            assert upstream.export(BODY, 5).ok
        finally:
            upstream.close()
    assert heads[0].startswith(b"POST http://backend.invalid:4318/v1/traces HTTP/1.1")
