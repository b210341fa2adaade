"""A real OpenAI-compatible chat server on 127.0.0.1 with canned replies, for judge tests.

Tests queue `Canned` replies (status, content, delay, headers); each POST to
/v1/chat/completions takes the next one (the last repeats), or, when a `responder`
is set, whatever it returns for the request (for concurrent callers). A request with
``"stream": true`` gets the reply as server-sent chunks. Request bodies
are kept for inspection. litellm talks to it as model ``openai/fake``.
"""

from __future__ import annotations

import json
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
        model = request.body.get("model", "fake")
        if canned.status == 200 and request.body.get("stream"):
            usage = (request.body.get("stream_options") or {}).get("include_usage", False)
            body = _stream(canned.content, model, usage)
            return Scripted(200, body, canned.headers, canned.delay)
        if canned.status == 200:
            payload = _completion(canned.content, model)
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
        "created": 1_700_000_000,
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


def _stream(content: str, model: str, with_usage: bool) -> bytes:
    """The completion as server-sent chunks of a few words each, as OpenAI streams it."""
    words = content.split(" ")
    pieces = [" ".join(words[i : i + 3]) + " " for i in range(0, len(words), 3)]
    pieces[-1] = pieces[-1][:-1]
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model}
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": piece} for piece in pieces]
    chunks = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        for delta in deltas
    ]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if with_usage:
        usage = {"prompt_tokens": 120, "completion_tokens": 15, "total_tokens": 135}
        chunks.append({**base, "choices": [], "usage": usage})
    lines = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


@contextmanager
def fake_openai() -> Iterator[FakeOpenAI]:
    with json_api() as api:
        yield FakeOpenAI(api)
