"""A real HTTP server on 127.0.0.1 implementing Vectara's factual-consistency contract.

It checks the key (403), the body (400) and the language (422), and scores by word
overlap so tests can tell a grounded answer from an invented one. Tests can push
scripted replies (`Scripted`) in front of it: rate limits, 5xx, slow replies.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

API_KEY = "vectara-test-key"
LANGUAGES = frozenset({"eng", "fra", "deu"})


@dataclass
class Scripted:
    """A reply served before the contract logic runs (None status: the contract answers)."""

    status: int | None = None
    body: dict[str, Any] = field(default_factory=lambda: {"messages": ["scripted"]})
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


class FakeVectara:
    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.script: list[Scripted] = []
        self.requests: list[tuple[dict[str, str], Any]] = []
        self.closing = threading.Event()

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def answer(self, headers: dict[str, str], body: Any) -> tuple[int, dict[str, Any]]:
        if headers.get("x-api-key") != API_KEY:
            return 403, {"messages": ["Unauthorized: bad API key"]}
        if (
            not isinstance(body, dict)
            or not isinstance(body.get("generated_text"), str)
            or not isinstance(body.get("source_texts"), list)
        ):
            return 400, {"field_errors": {"generated_text": "required"}}
        if body.get("language", "eng") not in LANGUAGES:
            return 422, {"messages": [f"Language {body.get('language')} is not supported"]}
        words = set(re.findall(r"\w+", " ".join(body["source_texts"]).lower()))
        answer = re.findall(r"\w+", body["generated_text"].lower())
        score = sum(w in words for w in answer) / len(answer) if answer else 1.0
        return 200, {"score": score, "p_consistent": score, "p_inconsistent": 1.0 - score}


@contextmanager
def fake_vectara() -> Iterator[FakeVectara]:
    fake: FakeVectara

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = None
            headers = {k.lower(): v for k, v in self.headers.items()}
            fake.requests.append((headers, body))
            scripted = fake.script.pop(0) if fake.script else Scripted()
            if scripted.delay and fake.closing.wait(scripted.delay):
                return
            if self.path != "/v2/evaluate_factual_consistency":
                status, payload = 404, {"messages": ["not found"]}
            elif scripted.status is not None:
                status, payload = scripted.status, scripted.body
            else:
                status, payload = fake.answer(headers, body)
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in scripted.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.block_on_close = False
    fake = FakeVectara(server)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield fake
    finally:
        fake.closing.set()
        server.shutdown()
        server.server_close()
