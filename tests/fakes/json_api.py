"""A real JSON-over-HTTP server on 127.0.0.1 whose routes are plain functions.

Fakes of backend APIs (Phoenix, MLflow, OpenAI, Vectara) are a few route functions on
top of it. Tests can push scripted replies (`Scripted`) in front of the routes: 5xx,
rate limits with Retry-After, slow replies. `local_server` is the bare lifecycle, for
fakes that do not speak JSON (OTLP).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    params: dict[str, str] = field(default_factory=dict)
    """Named groups of the route pattern that matched."""


@dataclass
class Scripted:
    """A reply served before any route runs.

    With no `status` the routes answer as usual, after `delay` and with `headers` added.
    Routes may return one too, for replies with headers or a delay. A `bytes` body is
    sent as it is, as server-sent events.
    """

    status: int | None = None
    body: Any = field(default_factory=lambda: {"error": "scripted"})
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


Route = Callable[[Request], tuple[int, Any] | Scripted]


class QuietHandler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def base_url(server: ThreadingHTTPServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}"


@contextmanager
def local_server(
    handler: type[BaseHTTPRequestHandler], port: int = 0
) -> Iterator[ThreadingHTTPServer]:
    """`handler` served on 127.0.0.1 (a free port unless given) until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    server.block_on_close = False  # a reply parked in a delay does not hold up the close
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class JSONAPI:
    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.routes: list[tuple[str, re.Pattern[str], Route]] = []
        self.script: list[Scripted] = []
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.closing = threading.Event()

    @property
    def base_url(self) -> str:
        return base_url(self.server)

    def route(self, method: str, pattern: str, handler: Route) -> None:
        self.routes.append((method, re.compile(pattern), handler))

    def answer(self, request: Request) -> Scripted:
        with self.lock:
            self.requests.append(request)
            scripted = self.script.pop(0) if self.script else Scripted()
        if scripted.status is not None:
            return scripted
        routed = self.routed(request)
        return replace(
            routed,
            headers={**routed.headers, **scripted.headers},
            delay=routed.delay + scripted.delay,
        )

    def routed(self, request: Request) -> Scripted:
        for method, pattern, handler in self.routes:
            match = pattern.fullmatch(request.path)
            if method == request.method and match:
                with self.lock:
                    reply = handler(replace(request, params=match.groupdict()))
                return reply if isinstance(reply, Scripted) else Scripted(*reply)
        return Scripted(404, {"error": f"no route for {request.method} {request.path}"})


@contextmanager
def json_api() -> Iterator[JSONAPI]:
    api: JSONAPI

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            self.handle_any()

        def do_POST(self) -> None:
            self.handle_any()

        def handle_any(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = None
            url = urlsplit(self.path)
            request = Request(
                self.command,
                url.path,
                dict(parse_qsl(url.query)),
                {k.lower(): v for k, v in self.headers.items()},
                body,
            )
            reply = api.answer(request)
            if reply.delay and api.closing.wait(reply.delay):
                return
            raw = isinstance(reply.body, bytes)  # e.g. server-sent events, sent as they are
            data = reply.body if raw else json.dumps(reply.body).encode()
            content_type = "text/event-stream" if raw else "application/json"
            try:
                self.send_response(reply.status or 200)
                for name, value in {"Content-Type": content_type, **reply.headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeouts)
                pass

    with local_server(Handler) as server:
        api = JSONAPI(server)
        try:
            yield api
        finally:
            api.closing.set()  # wakes replies parked in a delay
