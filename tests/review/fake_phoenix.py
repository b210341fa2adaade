"""A fake Phoenix: its annotation config and span annotations endpoints, as tracefact uses them."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit


def human(
    span_id: str, label: str, kind: str = "HUMAN", name: str = "tracefact.review"
) -> dict[str, Any]:
    """A span annotation as Phoenix returns it."""
    return {
        "span_id": span_id,
        "name": name,
        "annotator_kind": kind,
        "result": {"label": label, "score": None, "explanation": None},
        "metadata": {"reviewer": "ana"},
        "updated_at": "2026-01-01T00:00:00+00:00",
    }


class FakePhoenix(BaseHTTPRequestHandler):
    """Phoenix's annotation config and span annotations endpoints, as far as tracefact uses."""

    annotations: ClassVar[list[dict[str, Any]]] = []
    configs: ClassVar[list[dict[str, Any]]] = []
    queries: ClassVar[list[dict[str, list[str]]]] = []
    assigned: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        taken = any(c["name"] == body["name"] for c in self.configs)
        if not taken:
            self.configs.append(body)
        self._reply(409 if taken else 200, {"data": body})

    def do_PUT(self) -> None:
        self.assigned.append(urlsplit(self.path).path)
        self._reply(200, {"data": {}})

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        self.queries.append(query)
        assert url.path == "/v1/projects/default/span_annotations"
        wanted = set(query["span_ids"])
        found = [a for a in self.annotations if a["span_id"] in wanted]
        self._reply(200, {"data": found, "next_cursor": None})

    def _reply(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass
