"""A real HTTP server on 127.0.0.1 implementing Vectara's factual-consistency contract.

It checks the key (403), the body (400) and the language (422), and scores by word
overlap so tests can tell a grounded answer from an invented one. Tests can push
scripted replies (`Scripted`) in front of it: rate limits, 5xx, slow replies.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.fakes import json_api

API_KEY = "vectara-test-key"
LANGUAGES = frozenset({"eng", "fra", "deu"})


@dataclass
class Scripted(json_api.Scripted):
    """A reply served before the contract logic runs (None status: the contract answers)."""

    body: Any = field(default_factory=lambda: {"messages": ["scripted"]})


class FakeVectara:
    def __init__(self, api: json_api.JSONAPI) -> None:
        self.api = api
        api.route("POST", "/v2/evaluate_factual_consistency", self.evaluate)

    @property
    def base_url(self) -> str:
        return self.api.base_url

    @property
    def script(self) -> list[json_api.Scripted]:
        return self.api.script

    @script.setter
    def script(self, replies: list[json_api.Scripted]) -> None:
        self.api.script = list(replies)

    @property
    def requests(self) -> list[tuple[dict[str, str], Any]]:
        """(lower-cased headers, body) of every request, in order."""
        return [(r.headers, r.body) for r in self.api.requests]

    def evaluate(self, request: json_api.Request) -> tuple[int, Any]:
        body = request.body
        if request.headers.get("x-api-key") != API_KEY:
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
    with json_api.json_api() as api:
        yield FakeVectara(api)
