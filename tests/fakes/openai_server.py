"""A real OpenAI-compatible chat server on 127.0.0.1 with canned replies, for judge tests.

Tests queue `Canned` replies (status, content, delay, headers); each POST to
/v1/chat/completions takes the next one (the last repeats), or, when a `responder`
is set, whatever it returns for the request (for concurrent callers). Request bodies
are kept for inspection. litellm talks to it as model ``openai/fake``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "openai/fake"
API_KEY = "sk-test"


@dataclass
class Canned:
    """One reply: a chat completion with `content`, or an error `status` with a JSON body."""

    content: str = '{"verdict": "factual", "reasons": ["supported"]}'
    status: int = 200
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


class FakeOpenAI:
    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.replies: list[Canned] = [Canned()]
        self.responder: Callable[[dict[str, Any]], Canned] | None = None
        self.requests: list[dict[str, Any]] = []
        self.closing = threading.Event()
        self._lock = threading.Lock()

    @property
    def api_base(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def options(self, **extra: Any) -> dict[str, Any]:
        """litellm keyword arguments that reach this server."""
        return {"api_base": self.api_base, "api_key": API_KEY, **extra}

    def reply(self, *replies: Canned | str) -> None:
        """Queue replies in order; the last one repeats."""
        self.replies = [r if isinstance(r, Canned) else Canned(content=r) for r in replies]

    def next_reply(self, body: dict[str, Any]) -> Canned:
        with self._lock:
            self.requests.append(body)
            if self.responder is not None:
                return self.responder(body)
            return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]

    def prompt(self, index: int = -1) -> list[dict[str, str]]:
        messages: list[dict[str, str]] = self.requests[index]["messages"]
        return messages


def _completion(content: str, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 15, "total_tokens": 135},
    }


@contextmanager
def fake_openai() -> Iterator[FakeOpenAI]:
    fake: FakeOpenAI

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            if self.path != "/v1/chat/completions":
                self.send_response(404)
                self.end_headers()
                return
            canned = fake.next_reply(body)
            if canned.delay and fake.closing.wait(canned.delay):
                return
            if canned.status == 200:
                payload = _completion(canned.content, body.get("model", "fake"))
            else:
                payload = {"error": {"message": canned.content, "type": "fake", "code": None}}
            data = json.dumps(payload).encode()
            try:
                self.send_response(canned.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in canned.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeouts)
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.block_on_close = False
    fake = FakeOpenAI(server)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.closing.set()
        server.shutdown()
        server.server_close()
