"""The conversation on an LLM span, in whichever convention its instrumentor wrote it.

Each reader returns a `Conversation` (or None when its convention is absent), tried in
order: OpenInference's flattened messages, GenAI's JSON messages, OpenLLMetry's older
indexed attributes, span events, then `input.value` / `output.value` decoded by type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracefact import semconv
from tracefact.conventions._json import loads, text_of

MAX_MESSAGES = 1000
_USER = frozenset({"user", "human"})
_ASSISTANT = frozenset({"assistant", "ai", "model"})
_NOT_EVIDENCE = _ASSISTANT | {"function"}

Event = tuple[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    text: str | None
    """None when the message carries no text (tool calls, images)."""


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
        texts = [m.text for m in self.answer if m.text]
        return "\n".join(texts) if texts else None

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
        messages.append(Message(str(role or ""), text))
    return messages


def openinference(attributes: Mapping[str, Any]) -> Conversation | None:
    prompt = _openinference_messages(attributes, semconv.LLM_INPUT_MESSAGES)
    answer = _openinference_messages(attributes, semconv.LLM_OUTPUT_MESSAGES)
    if not prompt and not answer:
        return None
    return Conversation(prompt, answer)


# --- OpenTelemetry GenAI (also current OpenLLMetry) -----------------------------------
def _genai_messages(value: Any) -> list[Message]:
    decoded = loads(value)
    if not isinstance(decoded, list):
        return []
    messages = []
    for item in decoded[:MAX_MESSAGES]:
        if isinstance(item, dict):
            content = item.get("parts", item.get("content"))
            messages.append(Message(str(item.get("role", "")), text_of(content)))
    return messages


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
        messages.append(Message(str(role or ""), text))
    return messages


def openllmetry_legacy(attributes: Mapping[str, Any]) -> Conversation | None:
    prompt = _indexed_messages(attributes, semconv.GEN_AI_PROMPT)
    answer = _indexed_messages(attributes, semconv.GEN_AI_COMPLETION)
    if not prompt and not answer:
        return None
    return Conversation(prompt, answer)


# --- span events (GenAI's deprecated content events) ----------------------------------
def events(span_events: Sequence[Event]) -> Conversation | None:
    conversation = Conversation()
    for name, attributes in span_events[:MAX_MESSAGES]:
        if name == semconv.GEN_AI_CONTENT_PROMPT_EVENT:
            conversation.prompt += _genai_messages(attributes.get(semconv.GEN_AI_PROMPT))
        elif name == semconv.GEN_AI_CONTENT_COMPLETION_EVENT:
            conversation.answer += _genai_messages(attributes.get(semconv.GEN_AI_COMPLETION))
    if not conversation.prompt and not conversation.answer:
        return None
    return conversation


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
            text = _decode_output(value, attributes.get(mime_key) if mime_key else None)
            conversation.answer = [Message("assistant", text)]
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
    messages = []
    for item in decoded[:MAX_MESSAGES]:
        if isinstance(item, dict):
            role = item.get("role") or _langchain_role(item)
            messages.append(Message(str(role or ""), text_of(item.get("content", item))))
    return messages, None


def _langchain_role(item: Mapping[str, Any]) -> str | None:
    kwargs = item.get("kwargs")
    return kwargs.get("type") if isinstance(kwargs, dict) else None


def _decode_output(value: Any, mime: Any) -> str | None:
    """The answer's text; an OpenAI or LangChain response body yields the assistant's text."""
    if not isinstance(value, str):
        return None
    if not _is_json(value, mime):
        return value
    decoded = loads(value)
    if isinstance(decoded, str):
        return decoded
    if not isinstance(decoded, dict):
        return None
    choices = decoded.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        choice = choices[0]
        message = choice.get("message") or choice.get("delta")
        if isinstance(message, dict):
            return text_of(message.get("content"))
        return text_of(choice.get("text"))
    generations = decoded.get("generations")
    if isinstance(generations, list) and generations and isinstance(generations[0], list):
        first = generations[0][0] if generations[0] else None
        return text_of(first.get("text")) if isinstance(first, dict) else None
    for key in ("output", "outputs", "content", "text", "answer"):
        if key in decoded:
            return text_of(decoded[key])
    return None


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
    candidates = [read(attributes) for read in READERS]
    candidates += [events(span_events), values(attributes)]
    found = [c for c in candidates if c is not None]
    if not found:
        return None
    chosen = next((c for c in found if c.answer_text() is not None), found[0])
    if chosen.user_question() is None:
        chosen.question = next((q for c in found if (q := c.user_question())), None)
    if not chosen.prompt:
        chosen.prompt = next((c.prompt for c in found if c.prompt), [])
    return chosen
