"""The conversation on an LLM span, in whichever convention its instrumentor wrote it.

Each reader returns a `Conversation` (or None when its convention is absent), tried in
order: OpenInference's flattened messages, GenAI's JSON messages, OpenLLMetry's older
indexed attributes, span events, then `input.value` / `output.value` decoded by type.
Besides text, a message carries the tool calls it makes and the tool results it holds
(`tools.ToolResult`): tool messages (OpenInference, OpenAI, LangChain), GenAI
`tool_call_response` parts, Anthropic `tool_result` blocks, Gemini `function_response`
parts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from tracefact import semconv
from tracefact.conventions._json import loads, text_of
from tracefact.conventions.tools import ToolResult, evidence_text

MAX_MESSAGES = 1000
_USER = frozenset({"user", "human"})
_ASSISTANT = frozenset({"assistant", "ai", "model"})
_NOT_EVIDENCE = _ASSISTANT | {"function"}
_TOOL = "tool"
_TOOL_CALL_PARTS = frozenset({"tool_call", "tool_use", "function_call"})
_GEMINI_CALLS = ("function_call", "functionCall")
_GEMINI_RESPONSES = ("function_response", "functionResponse")

Event = tuple[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call a message makes: its id and its tool's name, where recorded."""

    id: str | None
    name: str | None


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    text: str | None
    """None when the message carries no text (tool calls, images)."""
    calls: tuple[Call, ...] = ()
    """The tool calls it makes (an assistant asking for tools)."""
    results: tuple[ToolResult, ...] = ()
    """The tool results it holds that are evidence."""


@dataclass(slots=True)
class Conversation:
    """The prompt's messages and the answer's, as one convention recorded them."""

    prompt: list[Message] = field(default_factory=list)
    answer: list[Message] = field(default_factory=list)
    question: str | None = None
    """Set when the convention states the question directly (plain `input.value`)."""

    def user_question(self) -> str | None:
        if self.question is not None:
            return self.question
        for message in reversed(self.prompt):
            if message.role in _USER and message.text:
                return message.text
        return None

    def answer_text(self) -> str | None:
        """The first answer message's text.

        Several answer messages are a response's choices (``n > 1``); the app shows one,
        almost always the first, so judging them joined would judge text nobody read.
        """
        return next((m.text for m in self.answer if m.text), None)

    def answer_calls(self) -> bool:
        """Whether the answer asks for tool calls."""
        return any(m.calls for m in self.answer)

    def tool_results(self) -> list[ToolResult]:
        """The prompt's tool results (earlier turns included), named after their calls."""
        names = {c.id: c.name for m in self.prompt for c in m.calls if c.id and c.name}
        return [
            r if r.name is not None else r._replace(name=names.get(r.call_id or ""))
            for m in self.prompt
            for r in m.results
        ]

    def prompt_evidence(self) -> list[str]:
        """Texts of the prompt other than the question.

        System, tool and earlier user messages, where apps often paste retrieved documents.
        """
        question = self.user_question()
        texts = [m.text for m in self.prompt if m.text and m.role not in _NOT_EVIDENCE]
        if question in texts:
            texts.remove(question)
        return texts


# --- OpenInference --------------------------------------------------------------------
def _openinference_messages(attributes: Mapping[str, Any], prefix: str) -> list[Message]:
    messages = []
    for i in range(MAX_MESSAGES):
        base = f"{prefix}.{i}.message."
        role = attributes.get(base + "role")
        content = attributes.get(base + "content")
        if (
            role is None
            and content is None
            and attributes.get(base + "contents.0.message_content.type") is None
        ):
            break
        text = content if isinstance(content, str) else None
        if text is None:
            parts = []
            for j in range(MAX_MESSAGES):
                part = attributes.get(f"{base}contents.{j}.message_content.text")
                if (
                    part is None
                    and attributes.get(f"{base}contents.{j}.message_content.type") is None
                ):
                    break
                if isinstance(part, str):
                    parts.append(part)
            text = "\n".join(parts) if parts else None
        role = str(role or "")
        results: tuple[ToolResult, ...] = ()
        if role == _TOOL:
            results = _result(
                content if content is not None else text,
                attributes.get(base + "tool_call_id"),
                attributes.get(base + "name"),
            )
        calls = _indexed_calls(
            attributes, f"{base}tool_calls.", "tool_call.id", "tool_call.function.name"
        )
        messages.append(Message(role, text, calls, results))
    return messages


def _indexed_calls(
    attributes: Mapping[str, Any], prefix: str, id_key: str, name_key: str
) -> tuple[Call, ...]:
    """Tool calls flattened as `{prefix}{j}.{id_key}` / `{prefix}{j}.{name_key}`."""
    calls = []
    for j in range(MAX_MESSAGES):
        call_id = attributes.get(f"{prefix}{j}.{id_key}")
        name = attributes.get(f"{prefix}{j}.{name_key}")
        if call_id is None and name is None:
            break
        calls.append(Call(_str(call_id), _str(name)))
    return tuple(calls)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _result(value: Any, call_id: Any, name: Any, error: bool = False) -> tuple[ToolResult, ...]:
    """A tool result found in a message, if it is evidence."""
    text = evidence_text(value, error=error)
    return () if text is None else (ToolResult(text, _str(call_id), _str(name)),)


def openinference(attributes: Mapping[str, Any]) -> Conversation | None:
    prompt = _openinference_messages(attributes, semconv.LLM_INPUT_MESSAGES)
    answer = _openinference_messages(attributes, semconv.LLM_OUTPUT_MESSAGES)
    if not prompt and not answer:
        return None
    return Conversation(prompt, answer)


# --- OpenTelemetry GenAI (also current OpenLLMetry) -----------------------------------
def _genai_messages(value: Any) -> list[Message]:
    """Messages of a GenAI attribute: JSON text, or structured (OTLP's arrays and kvlists)."""
    decoded = _decoded(value)
    if not isinstance(decoded, list):
        return []
    return [json_message(item) for item in decoded[:MAX_MESSAGES] if isinstance(item, dict)]


_MAX_DEPTH = 32


def _as_json(value: Any, depth: int = 0) -> Any:
    """A structured value (OTLP's arrays and kvlists: tuples and dicts) as its JSON.

    Lists where JSON has them, so one reader serves both forms.
    """
    if depth > _MAX_DEPTH:
        return None
    if isinstance(value, (tuple, list)):
        return [_as_json(item, depth + 1) for item in value[:MAX_MESSAGES]]
    if isinstance(value, Mapping):
        return {str(key): _as_json(item, depth + 1) for key, item in value.items()}
    return value


def _decoded(value: Any) -> Any:
    """A value as JSON: decoded where it is JSON text, OTLP's structure as JSON, else itself."""
    decoded = loads(value) if isinstance(value, str) else _as_json(value)
    return value if decoded is None else decoded


def json_message(item: Mapping[str, Any]) -> Message:
    """One message of a JSON conversation, in whichever format wrote it.

    GenAI (`parts`), OpenAI chat (`content`, `tool_calls`, `role: "tool"`), Anthropic
    (`tool_use` / `tool_result` blocks), Gemini (`function_call` / `function_response`
    parts) and LangChain's serialised messages (`kwargs`).
    """
    kind = item.get("type")
    if kind == "function_call_output":  # an OpenAI Responses API item: a tool's result
        return Message(_TOOL, None, (), _result(item.get("output"), item.get("call_id"), None))
    if kind == "function_call":  # a Responses API item: a tool call
        call = Call(_str(item.get("call_id")), _str(item.get("name")))
        return Message("assistant", None, (call,))
    kwargs = item.get("kwargs")
    fields: Mapping[str, Any] = kwargs if isinstance(kwargs, dict) else item
    role = str(item.get("role") or (fields.get("type") if fields is kwargs else "") or "")
    # No parts nor content: the item itself may say its text (`{"role": ..., "text": ...}`).
    content = item.get("parts", fields.get("content", item if fields is item else None))
    parts = content if isinstance(content, list) else []
    calls = [_call(part) for part in parts[:MAX_MESSAGES] if isinstance(part, dict)]
    listed = fields.get("tool_calls")
    if isinstance(listed, list):
        calls += [_call(call) for call in listed[:MAX_MESSAGES] if isinstance(call, dict)]
    results: tuple[ToolResult, ...] = ()
    for part in parts[:MAX_MESSAGES]:
        if isinstance(part, dict):
            results += _part_result(part)
    if role == _TOOL and not results:
        error = fields.get("status") == "error"
        # Its content, or the text of its parts (litellm writes a tool's result as parts).
        result = fields.get("content", text_of(content))
        results = _result(result, fields.get("tool_call_id"), fields.get("name"), error)
    return Message(role, text_of(content), tuple(c for c in calls if c is not None), results)


def _call(part: Mapping[str, Any]) -> Call | None:
    """A tool call in a message part or a `tool_calls` entry, else None."""
    for key in _GEMINI_CALLS:
        gemini = part.get(key)
        if isinstance(gemini, dict):
            return Call(_str(gemini.get("id")), _str(gemini.get("name")))
    kind = part.get("type")
    function = part.get("function")
    if kind in _TOOL_CALL_PARTS or isinstance(function, dict):
        name = function.get("name") if isinstance(function, dict) else part.get("name")
        return Call(_str(part.get("id")), _str(name))
    return None


def _part_result(part: Mapping[str, Any]) -> tuple[ToolResult, ...]:
    """The tool result in one message part: GenAI, Anthropic or Gemini."""
    kind = part.get("type")
    if kind == "tool_call_response":  # GenAI; pydantic-ai writes `result`
        response = part.get("response", part.get("result"))
        return _result(response, part.get("id"), part.get("name"))
    if kind == "tool_result":  # Anthropic
        error = part.get("is_error") is True
        return _result(part.get("content"), part.get("tool_use_id"), None, error)
    for key in _GEMINI_RESPONSES:
        gemini = part.get(key)
        if isinstance(gemini, dict):
            return _result(gemini.get("response"), gemini.get("id"), gemini.get("name"))
    return ()


def genai(attributes: Mapping[str, Any]) -> Conversation | None:
    prompt = _genai_messages(attributes.get(semconv.GEN_AI_INPUT_MESSAGES))
    answer = _genai_messages(attributes.get(semconv.GEN_AI_OUTPUT_MESSAGES))
    if not prompt and not answer:
        return None
    system = text_of(loads(attributes.get(semconv.GEN_AI_SYSTEM_INSTRUCTIONS)))
    if system:
        prompt.insert(0, Message("system", system))
    return Conversation(prompt, answer)


# --- OpenLLMetry before the GenAI message attributes ----------------------------------
def _indexed_messages(attributes: Mapping[str, Any], prefix: str) -> list[Message]:
    messages = []
    for i in range(MAX_MESSAGES):
        role = attributes.get(f"{prefix}.{i}.role")
        content = attributes.get(f"{prefix}.{i}.content")
        if role is None and content is None:
            break
        decoded = loads(content)
        text = text_of(decoded) if isinstance(decoded, list) else text_of(content)
        role = str(role or "")
        results: tuple[ToolResult, ...] = ()
        if role == _TOOL:
            results = _result(content, attributes.get(f"{prefix}.{i}.tool_call_id"), None)
        calls = _indexed_calls(attributes, f"{prefix}.{i}.tool_calls.", "id", "name")
        messages.append(Message(role, text, calls, results))
    return messages


def openllmetry_legacy(attributes: Mapping[str, Any]) -> Conversation | None:
    prompt = _indexed_messages(attributes, semconv.GEN_AI_PROMPT)
    answer = _indexed_messages(attributes, semconv.GEN_AI_COMPLETION)
    if not prompt and not answer:
        return None
    return Conversation(prompt, answer)


# --- span events (GenAI's deprecated content and message events) ----------------------
def events(span_events: Sequence[Event]) -> Conversation | None:
    conversation = Conversation()
    choices: list[tuple[int, Message]] = []
    for name, attributes in span_events[:MAX_MESSAGES]:
        if name == semconv.GEN_AI_CONTENT_PROMPT_EVENT:
            conversation.prompt += _genai_messages(attributes.get(semconv.GEN_AI_PROMPT))
        elif name == semconv.GEN_AI_CONTENT_COMPLETION_EVENT:
            conversation.answer += _genai_messages(attributes.get(semconv.GEN_AI_COMPLETION))
        elif name in semconv.GEN_AI_MESSAGE_EVENTS:
            role = semconv.GEN_AI_MESSAGE_EVENTS[name]
            conversation.prompt.append(_event_message(role, attributes))
        elif name == semconv.GEN_AI_CHOICE_EVENT:
            message = _decoded(attributes.get("message"))
            fields = message if isinstance(message, Mapping) else attributes
            index = attributes.get("index")
            order = index if isinstance(index, int) else len(choices)
            choices.append((order, _event_message("assistant", fields)))
    conversation.answer += [message for _, message in sorted(choices, key=lambda c: c[0])]
    if not conversation.prompt and not conversation.answer:
        return None
    return conversation


def _event_message(role: str, fields: Mapping[str, Any]) -> Message:
    """A GenAI message event's fields, read as the JSON message they spell out."""
    item = {key: _decoded(fields.get(key)) for key in ("content", "tool_calls") if key in fields}
    call_id = fields.get("id")
    return json_message({"role": role, **item, "tool_call_id": call_id})


# --- input.value / output.value and traceloop.entity.* --------------------------------
def values(attributes: Mapping[str, Any]) -> Conversation | None:
    conversation = Conversation()
    found = False
    for key, mime_key in (
        (semconv.INPUT_VALUE, semconv.INPUT_MIME_TYPE),
        (semconv.TRACELOOP_ENTITY_INPUT, None),
    ):
        value = attributes.get(key)
        if value is not None:
            found = True
            conversation.prompt, conversation.question = _decode_input(
                value, attributes.get(mime_key) if mime_key else None
            )
            break
    for key, mime_key in (
        (semconv.OUTPUT_VALUE, semconv.OUTPUT_MIME_TYPE),
        (semconv.TRACELOOP_ENTITY_OUTPUT, None),
    ):
        value = attributes.get(key)
        if value is not None:
            found = True
            message = _decode_output(value, attributes.get(mime_key) if mime_key else None)
            conversation.answer = [message]
            break
    return conversation if found else None


def _is_json(value: str, mime: Any) -> bool:
    if mime is not None:
        return bool(mime == semconv.MIME_JSON)
    return value.lstrip().startswith(("{", "["))


def _decode_input(value: Any, mime: Any) -> tuple[list[Message], str | None]:
    if not isinstance(value, str):
        return [], None
    if not _is_json(value, mime):
        return [], value
    decoded = loads(value)
    if isinstance(decoded, str):
        return [], decoded
    if isinstance(decoded, dict):
        for key in ("messages", "input", "inputs"):
            if key in decoded:
                decoded = decoded[key]
                break
    if isinstance(decoded, list) and decoded and isinstance(decoded[0], list):
        decoded = decoded[0]  # LangChain: a batch of message lists
    if isinstance(decoded, str):
        return [], decoded
    if not isinstance(decoded, list):
        return [], None
    return [json_message(item) for item in decoded[:MAX_MESSAGES] if isinstance(item, dict)], None


def _decode_output(value: Any, mime: Any) -> Message:
    """The answer: an OpenAI or LangChain response body yields the assistant's message."""
    if not isinstance(value, str):
        return Message("assistant", None)
    if not _is_json(value, mime):
        return Message("assistant", value)
    decoded = loads(value)
    if isinstance(decoded, str):
        return Message("assistant", decoded)
    if isinstance(decoded, list) or (
        isinstance(decoded, dict) and decoded.get("object") == "response"
    ):
        return _output_items(decoded)
    if not isinstance(decoded, dict):
        return Message("assistant", None)
    choices = decoded.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        choice = choices[0]
        message = choice.get("message") or choice.get("delta")
        if isinstance(message, dict):
            return json_message({**message, "role": "assistant"})
        return Message("assistant", text_of(choice.get("text")))
    generations = decoded.get("generations")
    if isinstance(generations, list) and generations and isinstance(generations[0], list):
        first = generations[0][0] if generations[0] else None
        if not isinstance(first, dict):
            return Message("assistant", None)
        message = first.get("message")
        calls = json_message(message).calls if isinstance(message, dict) else ()
        return Message("assistant", text_of(first.get("text")) or None, calls)
    for key in ("output", "outputs", "content", "text", "answer"):
        if key in decoded:
            return Message("assistant", text_of(decoded[key]))
    return Message("assistant", None)


def _output_items(value: Any, depth: int = 0) -> Message:
    """A list of output messages (chat messages, Responses API items or responses) as one.

    As the OpenAI Agents SDK records its model's output.
    """
    items = value.get("output") if isinstance(value, dict) else value
    texts: list[str] = []
    calls: list[Call] = []
    for item in items[:MAX_MESSAGES] if isinstance(items, list) else ():
        if not isinstance(item, dict):
            continue
        if item.get("object") == "response" and depth < 1:
            message = _output_items(item, depth + 1)
        else:
            message = json_message({**item, "role": "assistant"})
        texts += [message.text] if message.text else []
        calls += message.calls
    return Message("assistant", "\n".join(texts) if texts else None, tuple(calls))


READERS: tuple[Callable[[Mapping[str, Any]], Conversation | None], ...] = (
    openinference,
    genai,
    openllmetry_legacy,
)


def conversation(
    attributes: Mapping[str, Any], span_events: Sequence[Event] = ()
) -> Conversation | None:
    """The first convention's conversation that has an answer, else the first found.

    Its question is filled in from another convention when its own has none.
    """
    found = _Found(attributes, span_events)
    chosen = next((c for c in found if c.answer_text() is not None), None)
    if chosen is None:  # no text: the one that says it asked for tools, else the first
        chosen = next((c for c in found if c.answer_calls()), found.first())
        if chosen is None:
            return None
    if chosen.user_question() is None:
        chosen.question = next((q for c in found if (q := c.user_question())), None)
    if not chosen.prompt:
        chosen.prompt = next((c.prompt for c in found if c.prompt), [])
    return chosen


class _Found:
    """The conventions' conversations in `conversation`'s order, each read when first needed.

    The usual span is answered by its first convention: the others are never read.
    """

    def __init__(self, attributes: Mapping[str, Any], span_events: Sequence[Event]) -> None:
        reads: list[Callable[[], Conversation | None]] = [
            partial(read, attributes) for read in READERS
        ]
        reads += [partial(events, span_events), partial(values, attributes)]
        self._unread = iter(reads)
        self._read: list[Conversation] = []

    def __iter__(self) -> Iterator[Conversation]:
        yield from self._read
        for read in self._unread:
            if (found := read()) is not None:
                self._read.append(found)
                yield found

    def first(self) -> Conversation | None:
        return next(iter(self), None)
