"""`@tracefact.llm`, `@tracefact.retriever`, `@tracefact.tool` and `@tracefact.chain`.

One wrapper per call style (function, coroutine, generator, async generator), all
driving the shared `SpanRecorder`. Argument capture is planned once, at decoration
time, so a call only maps positional arguments to names.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from collections.abc import AsyncGenerator, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from opentelemetry import context as otel_context
from opentelemetry import trace

from tracefact.instrument.capture import is_secret_name
from tracefact.instrument.spans import UNSET, Kind, SpanRecorder, base_attributes, start_span

logger = logging.getLogger("tracefact")

F = TypeVar("F", bound=Callable[..., Any])

_INPUT_NAMES = ("input", "question", "query", "prompt", "messages", "q", "text")
_CONTEXT_NAMES = ("contexts", "context", "documents", "docs", "passages", "retrieved")
_SKIPPED_NAMES = frozenset({"self", "cls"})
ABANDONED = "stream abandoned by the caller before it ended"


@dataclass(frozen=True)
class _Plan:
    """What to capture from a call, worked out once per decorated function."""

    name: str
    kind: Kind
    model: str | None
    positional: tuple[str, ...]
    input_name: str | None
    contexts_name: str | None
    captured: frozenset[str]
    """Names that make up the input when no single input argument is named."""
    model_parameter: bool
    """The function takes a `model` argument, recorded when no model was given."""
    base: dict[str, Any]
    """The attributes every span of the function starts with, when its model is fixed."""
    input_index: int
    contexts_index: int
    """Where the input and the contexts come among positional arguments (`sys.maxsize`
    where they can only be given by keyword)."""

    def start(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> SpanRecorder:
        contexts, name = UNSET, self.contexts_name
        if name is not None:
            index = self.contexts_index
            contexts = args[index] if index < len(args) else kwargs.get(name, UNSET)
        input = self._input(args, kwargs)
        if self.model is None and self.model_parameter:
            found = self._argument("model", args, kwargs)
            model = found if isinstance(found, str) else None
            return start_span(self.name, self.kind, model, input, contexts)
        return start_span(self.name, self.kind, self.model, input, contexts, self.base)

    def _argument(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """One argument by parameter name, without binding the whole call (hot path)."""
        try:
            index = self.positional.index(name)
        except ValueError:
            return kwargs.get(name, UNSET)
        return args[index] if index < len(args) else kwargs.get(name, UNSET)

    def _input(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The named input argument, else the one or several captured arguments."""
        if self.input_name is not None:
            index = self.input_index
            return args[index] if index < len(args) else kwargs.get(self.input_name, UNSET)
        rest = {
            name: value
            for name, value in [*zip(self.positional, args, strict=False), *kwargs.items()]
            if name in self.captured and not is_secret_name(name)  # configure may change it
        }
        if len(rest) == 1:
            return next(iter(rest.values()))
        return rest if rest else UNSET

    def finish(self, recorder: SpanRecorder, result: Any) -> None:
        if self.kind == "retriever":
            recorder.record(documents=result)
        else:
            recorder.record_output(result)


def _plan(
    func: Callable[..., Any],
    kind: Kind,
    name: str | None,
    model: str | None,
    input: str | None,
    contexts: str | None,
) -> _Plan:
    params = inspect.signature(func).parameters
    names = list(params)
    name = name or _function_name(func)
    for override, what in ((input, "input"), (contexts, "contexts")):
        if override is not None and override not in params:
            raise ValueError(f"{name} has no parameter {override!r} for {what}=")
    input_name = input or next((n for n in _INPUT_NAMES if n in names), None)
    contexts_name = contexts or next((n for n in _CONTEXT_NAMES if n in names), None)
    if kind in ("retriever", "tool"):
        contexts_name = None  # what they return is the evidence, not what they are given
    positional = tuple(
        p.name for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    )
    captured = frozenset(
        n
        for n in names
        if n not in _SKIPPED_NAMES
        and n != contexts_name
        and n != "model"
        and params[n].kind not in (inspect.Parameter.VAR_POSITIONAL,)
    )
    return _Plan(
        name=name,
        kind=kind,
        model=model,
        positional=positional,
        input_name=input_name,
        contexts_name=contexts_name,
        captured=captured,
        model_parameter="model" in params,
        base=base_attributes(name, kind, model),
        input_index=_position(positional, input_name),
        contexts_index=_position(positional, contexts_name),
    )


def _position(positional: tuple[str, ...], name: str | None) -> int:
    """Where `name` comes among positional arguments; past any call's end when not one."""
    return positional.index(name) if name in positional else sys.maxsize


def _function_name(func: Callable[..., Any]) -> str:
    """A function's qualified name; a callable object's or a partial's, that of what it calls."""
    target = getattr(func, "func", func)  # functools.partial
    for candidate in (target, type(target)):
        name = getattr(candidate, "__qualname__", None)
        if isinstance(name, str):
            return name
    return type(func).__name__


def _begin(plan: _Plan, args: tuple[Any, ...], kwargs: dict[str, Any]) -> SpanRecorder | None:
    try:
        return plan.start(args, kwargs)
    except Exception:
        logger.exception("tracefact: could not start span for %s", plan.name)
        return None


def _wrap(func: F, plan: _Plan) -> F:
    if inspect.isasyncgenfunction(func):
        return _wrap_async_generator(func, plan)
    if inspect.isgeneratorfunction(func):
        return _wrap_generator(func, plan)
    if inspect.iscoroutinefunction(func):
        return _wrap_coroutine(func, plan)
    return _wrap_function(func, plan)


def _wrap_function(func: F, plan: _Plan) -> F:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        recorder = _begin(plan, args, kwargs)
        if recorder is None:
            return func(*args, **kwargs)
        token = otel_context.attach(trace.set_span_in_context(recorder.span))
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            recorder.fail(exc)
            raise
        else:
            plan.finish(recorder, result)
            return result
        finally:
            otel_context.detach(token)
            recorder.end()

    return wrapper  # type: ignore[return-value]


def _wrap_coroutine(func: F, plan: _Plan) -> F:
    @functools.wraps(func)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        recorder = _begin(plan, args, kwargs)
        if recorder is None:
            return await func(*args, **kwargs)
        token = otel_context.attach(trace.set_span_in_context(recorder.span))
        try:
            result = await func(*args, **kwargs)
        except BaseException as exc:
            recorder.fail(exc)
            raise
        else:
            plan.finish(recorder, result)
            return result
        finally:
            otel_context.detach(token)
            recorder.end()

    return wrapper  # type: ignore[return-value]


class _Stream:
    """Accumulates streamed chunks; text chunks are joined, anything else kept as a list."""

    __slots__ = ("chunks",)

    def __init__(self) -> None:
        self.chunks: list[Any] = []

    def result(self) -> Any:
        if all(isinstance(chunk, str) for chunk in self.chunks):
            return "".join(self.chunks)
        return self.chunks


def _end_stream(
    plan: _Plan, recorder: SpanRecorder, stream: _Stream, error: BaseException | None
) -> None:
    """Record what was streamed so far (all of it, or the part before an error)."""
    plan.finish(recorder, stream.result())
    if error is not None:
        recorder.fail(error)
    recorder.end()


def _wrap_generator(func: F, plan: _Plan) -> F:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        recorder = _begin(plan, args, kwargs)
        if recorder is None:
            return (yield from func(*args, **kwargs))
        span_context = trace.set_span_in_context(recorder.span)
        stream = _Stream()
        error: BaseException | None = None
        try:
            inner = func(*args, **kwargs)
            # The span is current only while the wrapped generator runs, never across a
            # yield: between chunks the caller's context stays the caller's. What the
            # caller sends or throws in goes on to the wrapped generator.
            step, value = inner.send, None
            while True:
                token = otel_context.attach(span_context)
                try:
                    chunk = step(value)
                except StopIteration as stop:
                    return stop.value
                finally:
                    otel_context.detach(token)
                stream.chunks.append(chunk)
                try:
                    value, step = (yield chunk), inner.send
                except GeneratorExit:
                    raise
                except BaseException as thrown:
                    step, value = inner.throw, thrown
        except GeneratorExit:
            error = GeneratorExit(ABANDONED)
            inner.close()
            raise
        except BaseException as exc:
            error = exc
            raise
        finally:
            _end_stream(plan, recorder, stream, error)

    return wrapper  # type: ignore[return-value]


def _wrap_async_generator(func: F, plan: _Plan) -> F:
    @functools.wraps(func)
    async def wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        recorder = _begin(plan, args, kwargs)
        if recorder is None:
            async for chunk in func(*args, **kwargs):
                yield chunk
            return
        span_context = trace.set_span_in_context(recorder.span)
        stream = _Stream()
        error: BaseException | None = None
        try:
            inner = func(*args, **kwargs)
            step, value = inner.asend, None
            while True:
                token = otel_context.attach(span_context)
                try:
                    chunk = await step(value)
                except StopAsyncIteration:
                    return
                finally:
                    otel_context.detach(token)
                stream.chunks.append(chunk)
                try:
                    value, step = (yield chunk), inner.asend
                except GeneratorExit:
                    raise
                except BaseException as thrown:
                    step, value = inner.athrow, thrown
        except GeneratorExit:
            error = GeneratorExit(ABANDONED)
            await inner.aclose()
            raise
        except BaseException as exc:
            error = exc
            raise
        finally:
            _end_stream(plan, recorder, stream, error)

    return wrapper  # type: ignore[return-value]


class SpanDecorator:
    """A decorator usable bare (``@tracefact.llm``) or with options.

    For example ``@tracefact.llm(model="gpt-4o-mini", input="q", contexts="docs")``.
    """

    def __init__(self, kind: Kind) -> None:
        self.kind: Kind = kind

    @overload
    def __call__(self, func: F, /) -> F: ...

    @overload
    def __call__(
        self,
        func: None = None,
        /,
        *,
        name: str | None = None,
        model: str | None = None,
        input: str | None = None,
        contexts: str | None = None,
    ) -> Callable[[F], F]: ...

    def __call__(
        self,
        func: F | None = None,
        /,
        *,
        name: str | None = None,
        model: str | None = None,
        input: str | None = None,
        contexts: str | None = None,
    ) -> F | Callable[[F], F]:
        """`name` defaults to the function's qualified name.

        `input` and `contexts` name the parameters to record as such when the defaults do not find
        them.
        """

        def apply(target: F) -> F:
            return _wrap(target, _plan(target, self.kind, name, model, input, contexts))

        return apply if func is None else apply(func)


llm = SpanDecorator("llm")
retriever = SpanDecorator("retriever")
chain = SpanDecorator("chain")
tool = SpanDecorator("tool")
"""A tool an agent calls: its result is evidence for later LLM spans of the trace."""
