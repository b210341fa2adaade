"""Phoenix's span annotations contract (`POST /v1/span_annotations`) on a real local server.

Validates bodies as Phoenix's request model does (422), checks the bearer token when
the fake has an API key (401), and keeps the annotations it accepted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.fakes.json_api import JSONAPI, Request, json_api

ANNOTATOR_KINDS = {"LLM", "CODE", "HUMAN"}
SPAN_ID = re.compile(r"[0-9a-f]{16}")


class FakePhoenix:
    def __init__(self, api: JSONAPI, api_key: str | None) -> None:
        self.api = api
        self.api_key = api_key
        self.annotations: list[dict[str, Any]] = []
        api.route("POST", "/v1/span_annotations", self.annotate)

    @property
    def base_url(self) -> str:
        return self.api.base_url

    def annotate(self, request: Request) -> tuple[int, Any]:
        if self.api_key and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return 401, {"detail": "Invalid token"}
        data = request.body.get("data") if isinstance(request.body, dict) else None
        if not isinstance(data, list) or not all(map(valid_annotation, data)):
            return 422, {"detail": "invalid span annotation"}
        self.annotations.extend(data)
        return 200, {"data": []}  # asynchronous insertion answers without ids


def valid_annotation(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    result = item.get("result")
    return (
        isinstance(item.get("span_id"), str)
        and bool(SPAN_ID.fullmatch(item["span_id"]))
        and isinstance(item.get("name"), str)
        and item.get("annotator_kind") in ANNOTATOR_KINDS
        and isinstance(result, dict)
        and isinstance(result.get("label"), (str, type(None)))
        and isinstance(result.get("score"), (int, float, type(None)))
        and isinstance(result.get("explanation"), (str, type(None)))
        and isinstance(item.get("metadata", {}), dict)
        and isinstance(item.get("identifier", ""), str)
    )


@contextmanager
def fake_phoenix(api_key: str | None = None) -> Iterator[FakePhoenix]:
    with json_api() as api:
        yield FakePhoenix(api, api_key)
