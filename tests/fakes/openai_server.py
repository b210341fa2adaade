"""A real OpenAI-compatible chat server on 127.0.0.1 with canned replies, for judge tests.

Tests queue `Canned` replies (status, content, delay, headers); each POST to
/v1/chat/completions takes the next one (the last repeats), or, when a `responder`
is set, whatever it returns for the request (for concurrent callers). Request bodies
are kept for inspection. litellm talks to it as model ``openai/fake``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.json_api import JSONAPI, Request, Scripted, json_api

MODEL = "openai/fake"
API_KEY = "sk-test"
PATH = "/v1/chat/completions"


@dataclass
class Canned:
    """One reply: a chat completion with `content`, or an error `status` with a JSON body."""

    content: str = '{"verdict": "factual", "reasons": ["supported"]}'
    status: int = 200
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


class FakeOpenAI:
    def __init__(self, api: JSONAPI) -> None:
        self.api = api
        self.replies: list[Canned] = [Canned()]
        self.responder: Callable[[dict[str, Any]], Canned] | None = None
        api.route("POST", PATH, self.complete)

    @property
    def api_base(self) -> str:
        return f"{self.api.base_url}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Bodies of the chat completion requests, in order."""
        return [r.body for r in self.api.requests if r.path == PATH]

    def options(self, **extra: Any) -> dict[str, Any]:
        """Litellm keyword arguments that reach this server."""
        return {"api_base": self.api_base, "api_key": API_KEY, **extra}

    def reply(self, *replies: Canned | str) -> None:
        """Queue replies in order; the last one repeats."""
        self.replies = [r if isinstance(r, Canned) else Canned(content=r) for r in replies]

    def complete(self, request: Request) -> Scripted:
        if self.responder is not None:
            canned = self.responder(request.body)
        else:
            canned = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if canned.status == 200:
            payload = _completion(canned.content, request.body.get("model", "fake"))
        else:
            payload = {"error": {"message": canned.content, "type": "fake", "code": None}}
        return Scripted(canned.status, payload, canned.headers, canned.delay)

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
    with json_api() as api:
        yield FakeOpenAI(api)
