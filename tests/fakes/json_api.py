"""A real JSON-over-HTTP server on 127.0.0.1 whose routes are plain functions.

Fakes of backend APIs (Phoenix, MLflow) are a few route functions on top of it. Tests
can push scripted replies (`Scripted`) in front of the routes: 5xx, rate limits with
Retry-After, slow replies.
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
    """A reply served before any route runs."""

    status: int
    body: Any = field(default_factory=lambda: {"error": "scripted"})
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


Route = Callable[[Request], tuple[int, Any]]


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
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def route(self, method: str, pattern: str, handler: Route) -> None:
        self.routes.append((method, re.compile(pattern), handler))

    def answer(self, request: Request) -> tuple[int, Any, dict[str, str], float]:
        with self.lock:
            self.requests.append(request)
            scripted = self.script.pop(0) if self.script else None
        if scripted is not None:
            return scripted.status, scripted.body, scripted.headers, scripted.delay
        for method, pattern, handler in self.routes:
            match = pattern.fullmatch(request.path)
            if method == request.method and match:
                with self.lock:
                    status, body = handler(replace(request, params=match.groupdict()))
                return status, body, {}, 0.0
        return 404, {"error": f"no route for {request.method} {request.path}"}, {}, 0.0


@contextmanager
def json_api() -> Iterator[JSONAPI]:
    api: JSONAPI

    class Handler(BaseHTTPRequestHandler):
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
            status, payload, headers, delay = api.answer(request)
            if delay and api.closing.wait(delay):
                return
            data = json.dumps(payload).encode()
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    api = JSONAPI(server)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield api
    finally:
        api.closing.set()
        server.shutdown()
        server.server_close()
