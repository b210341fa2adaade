"""The one core every instrumentation path shares: start a span, record, end it.

Decorators, `tracefact.span(...)` and the litellm wrapper all go through
`start_span` and `SpanRecorder`, so attribute names and content controls behave the
same everywhere.
"""

from __future__ import annotations

import inspect
import logging
import sys
import traceback
from collections.abc import Coroutine, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from tracefact import semconv
from tracefact._version import __version__
from tracefact.instrument.capture import (
    CaptureOptions,
    capture_options,
    fingerprint,
    finish,
    to_text,
)
from tracefact.instrument.documents import to_documents
from tracefact.instrument.pending import deferred
from tracefact.scrubbing import clean_text

logger = logging.getLogger("tracefact")

Kind = Literal["llm", "retriever", "chain", "tool"]
_OPENINFERENCE_KIND: dict[str, str] = {
    "llm": semconv.KIND_LLM,
    "retriever": semconv.KIND_RETRIEVER,
    "chain": semconv.KIND_CHAIN,
    "tool": semconv.KIND_TOOL,
}
UNSET: Any = object()
"""Marks an argument that was not given (None is a value worth recording)."""

_tracer_cache: tuple[object, trace.Tracer] | None = None


def _tracer() -> tuple[trace.Tracer, bool]:
    """The tracer of the current global provider (cached until the provider changes).

    And whether its spans may carry pending content (`instrument.pending`).
    """
    global _tracer_cache
    provider = trace.get_tracer_provider()
    cached = _tracer_cache
    if cached is None or cached[0] is not provider:
        cached = _tracer_cache = (provider, provider.get_tracer("tracefact", __version__))
    return cached[1], deferred(provider)


class SpanRecorder:
    """Records inputs, contexts, outputs, model and usage on one span.

    Every method swallows its own failures (logged): instrumentation must never
    break the call it observes.
    """

    __slots__ = ("_pending", "_scrubbed", "_token", "kind", "span")

    def __init__(
        self,
        span: Span,
        kind: Kind,
        scrubbed: Sequence[str] = (),
        pending: Sequence[str] | None = None,
    ) -> None:
        self.span = span
        self.kind = kind
        self._token: object | None = None
        self._scrubbed = scrubbed
        """Paths scrubbed so far; the attribute is rewritten whenever this grows."""
        self._pending = pending
        """Keys of texts left to finish where the span leaves (None: finish as recorded).

        Both are replaced, never changed in place: a span starts with shared constants."""

    def record(
        self,
        *,
        input: Any = UNSET,
        contexts: Any = UNSET,
        output: Any = UNSET,
        documents: Any = UNSET,
        model: str | None = None,
        usage: Any = None,
    ) -> None:
        """Record any of the call's parts; what is not given is left as it is."""
        try:
            scrubbed = list(self._scrubbed)
            waiting = self._pending
            pending = None if waiting is None else list(waiting)
            attributes: dict[str, Any] = {}
            if input is not UNSET:
                attributes.update(content_attributes(input, True, scrubbed, pending))
            if contexts is not UNSET:
                attributes.update(contexts_attributes(_contents(contexts), scrubbed, pending))
            if documents is not UNSET:
                attributes.update(self._documents(documents, scrubbed))
            if output is not UNSET:
                attributes.update(self._output(output, scrubbed, pending))
            if len(scrubbed) > len(self._scrubbed):
                attributes[semconv.SCRUBBED] = scrubbed
            if pending is not None and waiting is not None and pending != list(waiting):
                attributes[semconv.CONTENT_PENDING] = ",".join(pending)
            if model is not None:
                attributes.update(_model_attributes(model))
            self._scrubbed, self._pending = scrubbed, pending
            _write(self.span, attributes)
            if usage is not None:
                self._record_usage(usage)
        except Exception:
            logger.exception("tracefact: could not record on span")

    def record_output(self, output: Any) -> None:
        """`record(output=...)`, one attribute write where the output is a short text.

        The common case of a decorated call whose content is finished later: its key was
        listed pending as the span started, so the text is all there is to write.
        """
        pending = self._pending
        if (
            pending is not None
            and type(output) is str
            and semconv.OUTPUT_VALUE in pending
            and len(output) <= capture_options().max_attribute_length
        ):
            try:
                self.span.set_attribute(semconv.OUTPUT_VALUE, output)
            except Exception:
                logger.exception("tracefact: could not record on span")
            return
        self.record(output=output)

    def fail(self, exc: BaseException) -> None:
        """Mark the span as failed with this exception (which the caller re-raises).

        The message and stack trace are content (a provider's error may quote the
        prompt): they get the same capture, redaction and scrubbing as the output.
        """
        try:
            options = capture_options()
            scrubbed = list(self._scrubbed)
            message, stacktrace = _exception_text(exc, options, scrubbed)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {message}"))
            texts = {semconv.EXCEPTION_MESSAGE: message, semconv.EXCEPTION_STACKTRACE: stacktrace}
            try:
                self.span.record_exception(exc, texts)
            except Exception:  # the SDK prints the exception itself: a hostile __str__ fails
                self.span.add_event(
                    semconv.EXCEPTION_EVENT,
                    {semconv.EXCEPTION_TYPE: type(exc).__qualname__, **texts},
                )
            if len(scrubbed) > len(self._scrubbed):
                self._scrubbed = scrubbed
                self.span.set_attribute(semconv.SCRUBBED, scrubbed)
        except Exception:
            logger.exception("tracefact: could not record exception")

    def end(self) -> None:
        """End the span (the processor then finds contexts an LLM span was not given)."""
        self.span.end()

    def _output(
        self, output: Any, scrubbed: list[str], pending: list[str] | None
    ) -> dict[str, Any]:
        """The output's attributes; an LLM span's output that is not text is only marked.

        None is not the answer "null", and a coroutine is not its repr.
        """
        if self.kind == "llm" and type(output) is not str and _not_text(output):
            kind = type(output).__name__
            if inspect.iscoroutine(output):
                logger.warning(
                    "tracefact: %s returned a coroutine; decorate the async function itself",
                    getattr(self.span, "name", "an LLM function"),
                )
            return {semconv.OUTPUT_NOT_TEXT: kind}
        return content_attributes(output, False, scrubbed, pending)

    def _documents(self, result: Any, scrubbed: list[str]) -> dict[str, Any]:
        """The documents' attributes, as many as the span has room for, in their order.

        Past the span's limit on attributes the SDK would evict the oldest ones, the
        span's kind among them: the documents that do not fit are left out and counted.
        """
        documents = to_documents(result)
        options = capture_options()
        room = _room(self.span)
        attributes: dict[str, Any] = {}
        for i, doc in enumerate(documents):
            fields = options.capture_content + (doc.id is not None) + (doc.score is not None)
            if room is not None and len(attributes) + fields > room:
                attributes[semconv.DOCUMENTS_OMITTED] = len(documents) - i
                break
            if options.capture_content:
                key = semconv.retrieval_document(i, semconv.DOCUMENT_CONTENT)
                attributes[key] = finish(doc.content, options, key, scrubbed)
            if doc.id is not None:  # an id may be a signed URL or carry a token
                attributes[semconv.retrieval_document(i, semconv.DOCUMENT_ID)] = clean_text(doc.id)
            if doc.score is not None:
                attributes[semconv.retrieval_document(i, semconv.DOCUMENT_SCORE)] = doc.score
        return attributes

    def _record_usage(self, usage: Any) -> None:
        get = usage.get if isinstance(usage, Mapping) else lambda k: getattr(usage, k, None)
        prompt = _first_int(get, ("input_tokens", "prompt_tokens"))
        completion = _first_int(get, ("output_tokens", "completion_tokens"))
        if prompt is not None:
            self.span.set_attribute(semconv.GEN_AI_USAGE_INPUT_TOKENS, prompt)
            self.span.set_attribute(semconv.LLM_TOKEN_COUNT_PROMPT, prompt)
        if completion is not None:
            self.span.set_attribute(semconv.GEN_AI_USAGE_OUTPUT_TOKENS, completion)
            self.span.set_attribute(semconv.LLM_TOKEN_COUNT_COMPLETION, completion)
        if prompt is not None and completion is not None:
            self.span.set_attribute(semconv.LLM_TOKEN_COUNT_TOTAL, prompt + completion)

    # --- `with tracefact.span(...) as s:` -----------------------------------------
    def __enter__(self) -> SpanRecorder:
        self._token = otel_context.attach(trace.set_span_in_context(self.span))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self.fail(exc)
        if self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]
            self._token = None
        self.end()

    async def __aenter__(self) -> SpanRecorder:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)


def contexts_attributes(
    contents: list[str], scrubbed: list[str], pending: list[str] | None = None
) -> dict[str, Any]:
    """`tracefact.contexts`, or only their count when content capture is off.

    The reader takes contexts without a recorded source as explicit. Scrubbed paths are
    appended to `scrubbed`; with `pending`, texts short enough are left to finish later.
    """
    options = capture_options()
    if not options.capture_content:
        return {semconv.CONTEXTS_COUNT: len(contents)}
    if _pend(pending, semconv.CONTEXTS, _all_short(contents, options.max_attribute_length)):
        return {semconv.CONTEXTS: contents}
    texts = [
        finish(text, options, f"{semconv.CONTEXTS}.{i}", scrubbed)
        for i, text in enumerate(contents)
    ]
    return {semconv.CONTEXTS: texts}


def content_attributes(
    value: Any, is_input: bool, scrubbed: list[str], pending: list[str] | None = None
) -> dict[str, Any]:
    """`input.value` or `output.value` (with a JSON mime type where it applies).

    With content capture off, only the text's length and hash. Scrubbed paths are
    appended to `scrubbed`. With `pending`, a text short enough is recorded as it is and
    its key appended there: it is finished where the span leaves (`instrument.pending`).
    Anything else is serialised now, as it was when the call returned.
    """
    options = capture_options()
    key, mime_key = (
        (semconv.INPUT_VALUE, semconv.INPUT_MIME_TYPE)
        if is_input
        else (semconv.OUTPUT_VALUE, semconv.OUTPUT_MIME_TYPE)
    )
    if type(value) is str and options.capture_content:  # the hot path: no serialising
        if _pend(pending, key, len(value) <= options.max_attribute_length):
            return {key: value}
        return {key: finish(value, options, key, scrubbed)}
    if not options.capture_content:
        length, digest = fingerprint(to_text(value)[0])
        if is_input:
            return {semconv.INPUT_LENGTH: length, semconv.INPUT_SHA256: digest}
        return {semconv.OUTPUT_LENGTH: length, semconv.OUTPUT_SHA256: digest}
    _pend(pending, key, False)
    text, is_json = to_text(value, key, scrubbed)
    if is_json:
        return {key: finish(text, options, key, scrubbed), mime_key: semconv.MIME_JSON}
    return {key: finish(text, options, key, scrubbed)}


def _all_short(texts: list[str], limit: int) -> bool:
    """Texts pending content may hold: none needs a cut (the cut stays on the app thread).

    A longer one is finished as it is recorded, at a cost bounded by the limit. (A loop:
    `all()` over a generator costs more than the check itself for a few texts.)
    """
    for text in texts:  # noqa: SIM110 (the loop is the point)
        if type(text) is not str or len(text) > limit:
            return False
    return True


def _pend(pending: list[str] | None, key: str, short: bool) -> bool:
    """Whether `key`'s text is left pending: listed once while it is, never once it is not."""
    if pending is None:
        return False
    if short:
        if key not in pending:
            pending.append(key)
        return True
    if key in pending:
        pending.remove(key)
    return False


def _contents(contexts: Any) -> list[str]:
    """The texts of the contexts given: a list of str as it is, anything else converted."""
    if type(contexts) is list and _all_short(contexts, sys.maxsize):
        return contexts
    return [doc.content for doc in to_documents(contexts)]


_ROOM_KEPT = 4
"""Attributes a span keeps room for besides its documents: the count of those left out,
the scrubbed paths, the pending texts, a model name."""


def _room(span: Span) -> int | None:
    """How many more attributes the span holds before the SDK evicts its oldest; None: no limit."""
    bounded = getattr(span, "_attributes", None)
    maxlen = getattr(bounded, "maxlen", None)
    if type(maxlen) is not int or bounded is None:
        return None
    return max(maxlen - len(bounded) - _ROOM_KEPT, 0)


def _write(span: Span, attributes: dict[str, Any]) -> None:
    """Write attributes onto an open span; a single one through the cheaper `set_attribute`."""
    if len(attributes) == 1:
        [(key, value)] = attributes.items()
        span.set_attribute(key, value)
    elif attributes:
        span.set_attributes(attributes)


_NOT_TEXT = (bytes, bytearray, memoryview, Coroutine)


def _not_text(output: Any) -> bool:
    """An LLM span's output that is no answer: None, bytes, a coroutine."""
    return output is None or isinstance(output, _NOT_TEXT)


WITHHELD = "[withheld: capture_content=False]"


def _exception_text(
    exc: BaseException, options: CaptureOptions, scrubbed: list[str]
) -> tuple[str, str]:
    """An exception's message and stack trace, treated as content.

    Withheld when capture is off, else redacted, scrubbed and truncated like any
    recorded text (a provider's error may quote the prompt).
    """
    name = type(exc).__name__
    if not options.capture_content:  # where it happened, without source lines or values
        frames = "".join(
            f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}\n'
            for frame in traceback.extract_tb(exc.__traceback__)
        )
        return WITHHELD, f"Traceback (most recent call last):\n{frames}{name}: {WITHHELD}"
    try:
        message = str(exc)
        stacktrace = "".join(traceback.format_exception(exc))
    except Exception:  # a hostile __str__ must not cost the span its error
        message = f"<unprintable {name}>"
        stacktrace = "".join(traceback.format_tb(exc.__traceback__)) + f"{name}: {message}"
    return (
        finish(message, options, semconv.EXCEPTION_MESSAGE, scrubbed),
        finish(stacktrace, options, semconv.EXCEPTION_STACKTRACE, scrubbed),
    )


def _first_int(get: Any, keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def base_attributes(name: str, kind: Kind, model: str | None) -> dict[str, Any]:
    """What every span of this name, kind and model starts with (a decorator plans it once)."""
    attributes: dict[str, Any] = {semconv.OPENINFERENCE_SPAN_KIND: _OPENINFERENCE_KIND[kind]}
    if kind == "llm":
        attributes[semconv.GEN_AI_OPERATION_NAME] = semconv.GEN_AI_OPERATION_CHAT
        if model is not None:
            attributes.update(_model_attributes(model))
    elif kind == "retriever":
        attributes[semconv.GEN_AI_OPERATION_NAME] = semconv.GEN_AI_OPERATION_RETRIEVAL
    elif kind == "tool":  # its output is evidence for later LLM spans of the trace
        attributes[semconv.GEN_AI_OPERATION_NAME] = semconv.GEN_AI_OPERATION_EXECUTE_TOOL
        attributes[semconv.GEN_AI_TOOL_NAME] = name
        attributes[semconv.TOOL_NAME] = name
    return attributes


def _model_attributes(model: str) -> dict[str, str]:
    """The model's name in both conventions, scrubbed: a key pasted in its place stays out."""
    name = clean_text(model)
    return {semconv.LLM_MODEL_NAME: name, semconv.GEN_AI_REQUEST_MODEL: name}


_REMEMBERED: frozenset[Kind] = frozenset({"retriever", "tool"})
"""Kinds whose content the processor remembers on the app thread: finished as recorded."""


def start_span(
    name: str,
    kind: Kind,
    model: str | None = None,
    input: Any = UNSET,
    contexts: Any = UNSET,
    base: dict[str, Any] | None = None,
) -> SpanRecorder:
    """Start (but do not activate) a span of the given kind as a child of the current one.

    What is known at the start (model, input, contexts) goes in with the span's
    creation: one attribute validation pass instead of one per attribute. `base`: the
    span's `base_attributes`, when the caller planned them.
    """
    attributes = dict(base_attributes(name, kind, model) if base is None else base)
    options = capture_options()
    if kind == "llm" and not options.capture_content:
        attributes[semconv.CAPTURE_CONTENT] = False  # the reader skips: capture_off
    tracer, defer = _tracer()
    span_kind = SpanKind.CLIENT if kind == "llm" else SpanKind.INTERNAL
    pending: list[str] | None = None
    if defer and options.capture_content and kind not in _REMEMBERED:
        given = _recorded_as_given(attributes, input, contexts, options.max_attribute_length)
        if given is not None:  # the common case: short texts, nothing else to do now
            span = tracer.start_span(name, kind=span_kind, attributes=attributes)
            return SpanRecorder(span, kind, (), given)
        # The output is listed ahead: a text output, the common case, costs no second write.
        pending = [semconv.OUTPUT_VALUE]
    scrubbed: list[str] = []
    try:
        if input is not UNSET:
            attributes.update(content_attributes(input, True, scrubbed, pending))
        if contexts is not UNSET:
            attributes.update(contexts_attributes(_contents(contexts), scrubbed, pending))
        if scrubbed:
            attributes[semconv.SCRUBBED] = scrubbed
        if pending:
            attributes[semconv.CONTENT_PENDING] = ",".join(pending)
    except Exception:
        logger.exception("tracefact: could not record the input or contexts")
    span = tracer.start_span(name, kind=span_kind, attributes=attributes)
    return SpanRecorder(span, kind, scrubbed, pending)


def _pending_keys(input: bool, contexts: bool) -> tuple[tuple[str, ...], str]:
    keys = (
        semconv.OUTPUT_VALUE,
        *((semconv.INPUT_VALUE,) if input else ()),
        *((semconv.CONTEXTS,) if contexts else ()),
    )
    return keys, ",".join(keys)


_PENDING_AS_GIVEN = {
    (input, contexts): _pending_keys(input, contexts)
    for input in (False, True)
    for contexts in (False, True)
}
"""The pending keys of a span started with short texts, by (input given, contexts given):
shared, never changed (`SpanRecorder` replaces its own), and the attribute's value."""


def _recorded_as_given(
    attributes: dict[str, Any], input: Any, contexts: Any, limit: int
) -> tuple[str, ...] | None:
    """The pending keys when every text given is short and is recorded as it is.

    Into `attributes`, with the output's key listed ahead, as `content_attributes` and
    `contexts_attributes` record them where content is finished later. None, and
    `attributes` untouched, when anything given needs converting or a cut now.
    """
    has_input, has_contexts = input is not UNSET, contexts is not UNSET
    if has_input and (type(input) is not str or len(input) > limit):
        return None
    if has_contexts and (type(contexts) is not list or not _all_short(contexts, limit)):
        return None
    if has_input:
        attributes[semconv.INPUT_VALUE] = input
    if has_contexts:
        attributes[semconv.CONTEXTS] = contexts
    keys, value = _PENDING_AS_GIVEN[has_input, has_contexts]
    attributes[semconv.CONTENT_PENDING] = value
    return keys


def span(name: str, kind: Kind = "chain", *, model: str | None = None) -> SpanRecorder:
    """A span for code that is not one function.

    ``with tracefact.span("answer", kind="llm") as s: s.record(input=..., contexts=...,
    output=...)``. Works with ``async with`` too.
    """
    if kind not in _OPENINFERENCE_KIND:
        raise ValueError(f"kind must be one of {sorted(_OPENINFERENCE_KIND)}, not {kind!r}")
    return start_span(name, kind, model)
