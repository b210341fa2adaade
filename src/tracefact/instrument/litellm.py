"""`instrument_litellm()`: plain `litellm.completion` / `acompletion` calls become LLM spans.

Patching is done with wrapt on the `litellm` module attributes, so code that calls
``litellm.completion(...)`` is traced; calls made while OpenTelemetry
instrumentation is suppressed (tracefact's own judges) are not. A module that ran
``from litellm import completion`` before the patch holds the original function: its
global is rebound to the patched one too (and restored by `uninstrument_litellm`), with
one log line naming it, so those calls are traced as well.
"""

from __future__ import annotations

import logging
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace

from tracefact._imports import import_litellm
from tracefact._otel import is_suppressed
from tracefact.instrument.spans import SpanRecorder, start_span

logger = logging.getLogger("tracefact")

_PATCHED = ("completion", "acompletion")
_lock = threading.Lock()  # instrument/uninstrument may race from several threads


_rebound: list[tuple[str, str]] = []
"""(module, global) pairs `instrument_litellm` rebound, for `uninstrument_litellm`."""


def instrument_litellm() -> None:
    """Wrap `litellm.completion` and `litellm.acompletion`; calling it again does nothing.

    Raises:
        MissingExtraError: litellm is not installed (it names the extra to install).
    """
    litellm = import_litellm()
    with _lock:
        for name in _PATCHED:
            current = getattr(litellm, name)
            if isinstance(current, _LiteLLMWrapper):
                continue
            wrapper = _LiteLLMWrapper(current, _async_call if name == "acompletion" else _sync_call)
            setattr(litellm, name, wrapper)
            _rebind_imported(current, wrapper)


def _rebind_imported(original: Any, wrapper: Any) -> None:
    """Point module globals bound to `original` (``from litellm import completion``) at `wrapper`.

    litellm's own modules are left alone: they call each other internally, and wrapping
    those calls would trace one request twice.
    """
    for module_name, module in sys.modules.copy().items():  # copy(): atomic, unlike iterating
        if module is None or module_name.partition(".")[0] in ("litellm", "tracefact"):
            continue
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for global_name, value in namespace.copy().items():
            if value is original:
                namespace[global_name] = wrapper
                _rebound.append((module_name, global_name))
                logger.info(
                    "instrument_litellm: %s.%s was imported before instrumentation; "
                    "rebound it so its calls are traced",
                    module_name,
                    global_name,
                )


def uninstrument_litellm() -> None:
    """Restore the original litellm functions, and the globals rebound to them; safe twice."""
    litellm = import_litellm()
    with _lock:
        for name in _PATCHED:
            current = getattr(litellm, name)
            if isinstance(current, _LiteLLMWrapper):
                setattr(litellm, name, current.__wrapped__)
        for module_name, global_name in _rebound:
            namespace = getattr(sys.modules.get(module_name), "__dict__", {})
            current = namespace.get(global_name)
            if isinstance(current, _LiteLLMWrapper):
                namespace[global_name] = current.__wrapped__
        _rebound.clear()


class _LiteLLMWrapper(wrapt.FunctionWrapper[Any, Any]):
    """Marks our patch, so instrumenting twice is a no-op and uninstrument finds it."""

    def __init__(self, wrapped: Callable[..., Any], wrapper: Callable[..., Any]) -> None:
        super().__init__(wrapped, wrapper)


def _start(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> SpanRecorder | None:
    try:
        model = kwargs.get("model", args[0] if args else None)
        messages = kwargs.get("messages", args[1] if len(args) > 1 else None)
        model_name = model if isinstance(model, str) else None
        recorder = start_span(f"litellm {model_name or 'completion'}", "llm", model_name)
        if messages is not None:
            recorder.record(input=_last_user_text(messages))
        return recorder
    except Exception:
        logger.exception("tracefact: could not start litellm span")
        return None


def _sync_call(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    if is_suppressed():
        return wrapped(*args, **kwargs)
    recorder = _start(args, kwargs)
    if recorder is None:
        return wrapped(*args, **kwargs)
    token = otel_context.attach(trace.set_span_in_context(recorder.span))
    try:
        response = wrapped(*args, **kwargs)
    except BaseException as exc:
        recorder.fail(exc)
        recorder.end()
        raise
    finally:
        otel_context.detach(token)
    return _finish(recorder, response, kwargs)


async def _async_call(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    if is_suppressed():
        return await wrapped(*args, **kwargs)
    recorder = _start(args, kwargs)
    if recorder is None:
        return await wrapped(*args, **kwargs)
    token = otel_context.attach(trace.set_span_in_context(recorder.span))
    try:
        response = await wrapped(*args, **kwargs)
    except BaseException as exc:
        recorder.fail(exc)
        recorder.end()
        raise
    finally:
        otel_context.detach(token)
    return _finish(recorder, response, kwargs)


def _finish(recorder: SpanRecorder, response: Any, kwargs: Mapping[str, Any]) -> Any:
    if kwargs.get("stream"):
        return _TracedStream(response, recorder)
    try:
        recorder.record(output=_response_text(response), usage=getattr(response, "usage", None))
    finally:
        recorder.end()
    return response


class _StreamState:
    """What a stream has produced so far; shared with the abandon finaliser."""

    __slots__ = ("done", "parts", "recorder", "usage")

    def __init__(self, recorder: SpanRecorder) -> None:
        self.recorder = recorder
        self.parts: list[str] = []
        self.usage: Any = None
        self.done = False

    def add(self, chunk: Any) -> None:
        try:
            delta = chunk.choices[0].delta
            content = getattr(delta, "content", None)
            if content:
                self.parts.append(content)
        except (AttributeError, IndexError, TypeError):
            pass
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = usage

    def end(self, error: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        self.recorder.record(output="".join(self.parts), usage=self.usage)
        if error is not None:
            self.recorder.fail(error)
        self.recorder.end()


def _abandon(state: _StreamState) -> None:
    state.end(GeneratorExit("stream abandoned by the caller before it ended"))


class _TracedStream(wrapt.ObjectProxy[Any]):
    """Passes litellm's stream through, recording the joined text when it ends."""

    def __init__(self, wrapped: Any, recorder: SpanRecorder) -> None:
        super().__init__(wrapped)
        self._self_state = _StreamState(recorder)
        weakref.finalize(self, _abandon, self._self_state)

    def __iter__(self) -> _TracedStream:
        return self

    def __next__(self) -> Any:
        try:
            chunk = self.__wrapped__.__next__()
        except StopIteration:
            self._self_state.end(None)
            raise
        except BaseException as exc:
            self._self_state.end(exc)
            raise
        self._self_state.add(chunk)
        return chunk

    def __aiter__(self) -> _TracedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            chunk = await self.__wrapped__.__anext__()
        except StopAsyncIteration:
            self._self_state.end(None)
            raise
        except BaseException as exc:
            self._self_state.end(exc)
            raise
        self._self_state.add(chunk)
        return chunk


def _last_user_text(messages: Any) -> Any:
    """The question, for evaluation: the last user message's text (else all messages)."""
    try:
        for message in reversed(list(messages)):
            if message.get("role") == "user":
                return _content_text(message.get("content"))
    except (AttributeError, TypeError):
        pass
    return messages


def _content_text(content: Any) -> Any:
    if isinstance(content, list):  # multimodal parts: keep the text ones
        texts = [p.get("text", "") for p in content if isinstance(p, dict) and "text" in p]
        return "\n".join(texts) if texts else content
    return content


def _response_text(response: Any) -> Any:
    try:
        return response.choices[0].message.content or ""
    except (AttributeError, IndexError, TypeError):
        return response
