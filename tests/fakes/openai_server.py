"""A real OpenAI-compatible chat server on 127.0.0.1 with canned replies, for judge tests.

Tests queue `Canned` replies (status, content or tool calls, delay, headers); each POST to
/v1/chat/completions takes the next one (the last repeats), or, when a `responder`
is set, whatever it returns for the request (for concurrent callers and agents, whose next
reply depends on the tool results they send). A request with ``"stream": true`` gets the
reply as server-sent chunks, tool calls streamed as OpenAI streams them. Request bodies
are kept for inspection. litellm talks to it as model ``openai/fake``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.json_api import JSONAPI, Request, Scripted, json_api

MODEL = "openai/fake"
API_KEY = "sk-test"
PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class ToolCall:
    """A function call the model asks for; `arguments` is the JSON text OpenAI sends."""

    name: str
    arguments: str = "{}"
    id: str = "call_1"

    def as_openai(self) -> dict[str, Any]:
        function = {"name": self.name, "arguments": self.arguments}
        return {"id": self.id, "type": "function", "function": function}


@dataclass
class Canned:
    """One reply: a chat completion with `content` or `tool_calls`, or an error `status`.

    An error's `content` is its message, in a JSON error body.
    """

    content: str = '{"verdict": "factual", "reasons": ["supported"]}'
    status: int = 200
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    tool_calls: tuple[ToolCall, ...] = ()
    """When set, the reply asks for these calls and has no content."""


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
            body = _stream(canned, model, usage)
            return Scripted(200, body, canned.headers, canned.delay)
        if canned.status == 200:
            payload = _completion(canned, model)
        else:
            payload = {"error": {"message": canned.content, "type": "fake", "code": None}}
        return Scripted(canned.status, payload, canned.headers, canned.delay)

    def prompt(self, index: int = -1) -> list[dict[str, str]]:
        messages: list[dict[str, str]] = self.requests[index]["messages"]
        return messages


def _completion(canned: Canned, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": canned.content}
    if canned.tool_calls:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [call.as_openai() for call in canned.tool_calls],
        }
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if canned.tool_calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 15, "total_tokens": 135},
    }


def _pieces(text: str) -> list[str]:
    """A text in pieces of a few words each, as OpenAI streams it."""
    words = text.split(" ")
    pieces = [" ".join(words[i : i + 3]) + " " for i in range(0, len(words), 3)]
    pieces[-1] = pieces[-1][:-1]
    return pieces


def _stream(canned: Canned, model: str, with_usage: bool) -> bytes:
    """The completion as server-sent chunks, as OpenAI streams it.

    Text a few words at a time; each tool call's id and name first, then its arguments in
    pieces.
    """
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model}
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if canned.tool_calls:
        deltas[0]["content"] = None
        for index, call in enumerate(canned.tool_calls):
            head = {"index": index, "id": call.id, "type": "function"}
            head["function"] = {"name": call.name, "arguments": ""}
            deltas.append({"tool_calls": [head]})
            deltas += [
                {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                for piece in _pieces(call.arguments)
            ]
    else:
        deltas += [{"content": piece} for piece in _pieces(canned.content)]
    chunks = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        for delta in deltas
    ]
    finish = "tool_calls" if canned.tool_calls else "stop"
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if with_usage:
        usage = {"prompt_tokens": 120, "completion_tokens": 15, "total_tokens": 135}
        chunks.append({**base, "choices": [], "usage": usage})
    lines = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


@contextmanager
def fake_openai() -> Iterator[FakeOpenAI]:
    with json_api() as api:
        yield FakeOpenAI(api)


def user_environment() -> dict[str, str]:
    """This process's environment less tracefact's and OpenTelemetry's variables.

    An example runs with what its user sets (the OpenAI variables), nothing a test adds.
    """
    return {k: v for k, v in os.environ.items() if not k.startswith(("TRACEFACT_", "OTEL_"))}
