"""OTLP/HTTP to an upstream: h11 on one keep-alive socket, or httpx where TLS or a proxy is.

httpx's client (URL merging, cookies, auth, redirects, its connection pool) cost more
CPU than the rest of forwarding a batch. A plain `http://` upstream reached directly
(no proxy variable applies to it, no credentials in its URL) is spoken to with h11,
httpx's own HTTP/1.1 parser, on a socket of our own; `https://`, a proxy or a URL with
credentials goes through httpx as before. Either way the reply is an `httpx.Response`,
read in one place (`HttpUpstream.export`).
"""

from __future__ import annotations

import contextlib
import gzip
import select
import socket
import urllib.parse
import urllib.request

import h11
import httpx
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tracefact._retry import Attempt, attempt_of
from tracefact.collector.config import Upstream

READ_SIZE = 64 * 1024


class HttpUpstream:
    """OTLP/HTTP protobuf with the upstream's headers."""

    def __init__(self, upstream: Upstream) -> None:
        parts = urllib.parse.urlsplit(upstream.endpoint)
        path = parts.path.rstrip("/")  # before a query string (`?token=...`), if any
        path = path if path.endswith("/v1/traces") else f"{path}/v1/traces"
        parts = parts._replace(path=path)
        self.url = urllib.parse.urlunsplit(parts)
        self.gzip = upstream.compression == "gzip"
        headers = {**upstream.headers, "Content-Type": "application/x-protobuf"}
        if self.gzip:
            headers["Content-Encoding"] = "gzip"
        self._client: _Direct | _Httpx = (
            _Direct(parts, self.url, headers) if direct(parts) else _Httpx(self.url, headers)
        )

    def export(self, body: bytes, timeout: float) -> Attempt:
        try:
            response = self._client.post(gzip.compress(body) if self.gzip else body, timeout)
        except (httpx.HTTPError, h11.ProtocolError, OSError) as exc:
            return Attempt(False, True, f"{type(exc).__name__}: {exc}")
        if response.is_success:
            protobuf = "protobuf" in response.headers.get("content-type", "")
            return accepted(response.content) if protobuf else Attempt(True)
        return attempt_of(response)

    def close(self) -> None:
        self._client.close()


def accepted(reply: bytes) -> Attempt:
    """A 200 / OK: read OTLP's partial success, where a backend says what it dropped."""
    try:
        partial = ExportTraceServiceResponse.FromString(reply).partial_success
    except DecodeError:
        return Attempt(True)  # not protobuf (a JSON or empty body): nothing said
    if partial.rejected_spans <= 0:
        return Attempt(True)
    error = f"partial success: {partial.error_message or 'no message'}"
    return Attempt(True, error=error, rejected=int(partial.rejected_spans))


def direct(parts: urllib.parse.SplitResult) -> bool:
    """Plain HTTP, no credentials in the URL, and no proxy variable that applies to it."""
    if parts.scheme != "http" or parts.username is not None:
        return False
    proxies = urllib.request.getproxies_environment()
    if not (proxies.get("http") or proxies.get("all")):
        return True
    return bool(urllib.request.proxy_bypass(parts.hostname or ""))


class _Httpx:
    """httpx's client: TLS, proxies, credentials in the URL."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self._url = url
        self._client = httpx.Client(headers=headers)

    def post(self, body: bytes, timeout: float) -> httpx.Response:
        return self._client.post(self._url, content=body, timeout=timeout)

    def close(self) -> None:
        self._client.close()


class _Direct:
    """One keep-alive connection, used by one thread at a time (the upstream's sender).

    `timeout` bounds each connect, send and read, as httpx's does. `close` may come from
    another thread while a post is under way (the drain deadline passed): it shuts the
    socket down, so the post fails at once instead of waiting for its timeout.
    """

    def __init__(self, parts: urllib.parse.SplitResult, url: str, headers: dict[str, str]) -> None:
        self._address = (parts.hostname or "", parts.port or 80)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        self._target = target.encode()
        self._headers = [("Host", parts.netloc), *headers.items()]
        self._request = httpx.Request("POST", url)  # what a reply names in its errors
        self._socket: socket.socket | None = None
        self._http = h11.Connection(h11.CLIENT)

    def post(self, body: bytes, timeout: float) -> httpx.Response:
        try:
            return self._exchange(self._connection(timeout), body, timeout)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        connection, self._socket = self._socket, None
        if connection is not None:
            with contextlib.suppress(OSError):  # not connected any more
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()

    def _connection(self, timeout: float) -> socket.socket:
        """The open connection, or a new one where there is none or the upstream closed it."""
        if self._socket is not None and select.select([self._socket], [], [], 0)[0]:
            self.close()  # readable while idle: closed by the upstream (or junk)
        if self._socket is None:
            self._socket = socket.create_connection(self._address, timeout)
            self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._http = h11.Connection(h11.CLIENT)
        self._socket.settimeout(timeout)
        return self._socket

    def _exchange(self, connection: socket.socket, body: bytes, timeout: float) -> httpx.Response:
        http = self._http
        headers = [*self._headers, ("Content-Length", str(len(body)))]
        request = h11.Request(method="POST", target=self._target, headers=headers)
        connection.sendall(http.send(request) or b"")
        for data in http.send_with_data_passthrough(h11.Data(data=body)) or ():
            connection.sendall(data)
        http.send(h11.EndOfMessage())
        reply: h11.Response | None = None
        content = bytearray()
        while True:
            event = http.next_event()
            if event is h11.NEED_DATA:
                http.receive_data(connection.recv(READ_SIZE))
            elif isinstance(event, h11.Response):
                reply = event
            elif isinstance(event, h11.Data):
                content += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
        if http.our_state is h11.DONE and http.their_state is h11.DONE:
            http.start_next_cycle()
        else:
            self.close()  # the upstream closes the connection after this reply
        assert reply is not None, "h11 ends a message only after its response"
        return httpx.Response(
            reply.status_code, headers=reply.headers, content=bytes(content), request=self._request
        )
