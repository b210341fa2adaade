"""OpenTelemetry plumbing that several parts of tracefact need, written once.

- Suppression: evaluation, result sinks and exports must never trace themselves (a
  judge's litellm call or a sink's httpx request would otherwise become spans, and an
  LLM span would be evaluated in turn). OpenTelemetry's instrumentations check one
  context key; it is private, so it is named here only.
- Fork safety: an object that owns threads or locks must start afresh in a forked
  child, as OpenTelemetry's BatchSpanProcessor does, without keeping itself alive.
- Copies: an ended SDK span is immutable, so what tracefact adds to one leaves as a copy.
"""

from __future__ import annotations

import contextvars
import os
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import Status

from tracefact.scrubbing import valid_utf8

_SUPPRESS_KEY = otel_context._SUPPRESS_INSTRUMENTATION_KEY


def is_suppressed() -> bool:
    """True while OpenTelemetry instrumentation is suppressed in the current context."""
    return bool(otel_context.get_value(_SUPPRESS_KEY))


@contextmanager
def suppress_instrumentation() -> Iterator[None]:
    """Run the block with instrumentation suppressed (nothing in it becomes a span)."""
    token = otel_context.attach(otel_context.set_value(_SUPPRESS_KEY, True))
    try:
        yield
    finally:
        otel_context.detach(token)


def suppressed_context() -> contextvars.Context:
    """A fresh context with no active span and instrumentation suppressed.

    For a thread or an event loop of tracefact's own.
    """
    context = contextvars.Context()
    suppressed = otel_context.set_value(_SUPPRESS_KEY, True, otel_context.Context())
    context.run(otel_context.attach, suppressed)
    return context


def run_suppressed(target: Callable[[], None]) -> Callable[[], None]:
    """`target` wrapped to run in `suppressed_context()`: a thread's body, for example."""

    def run() -> None:
        suppressed_context().run(target)

    return run


def reset_after_fork(reset: Callable[[], object]) -> None:
    """Call the bound method `reset` in a forked child, holding its object only weakly."""
    method = weakref.WeakMethod(reset)

    def after_in_child() -> None:
        bound = method()
        if bound is not None:
            bound()

    os.register_at_fork(after_in_child=after_in_child)


def with_valid_text(span: ReadableSpan) -> ReadableSpan:
    """The span with its name, event names, status text and attribute keys valid UTF-8.

    OTLP's encoders refuse a lone surrogate there (attribute values they repair), and the
    whole batch with it.
    """
    status = span.status
    return copied(
        span,
        {valid_utf8(key): value for key, value in (span.attributes or {}).items()},
        [Event(valid_utf8(e.name), e.attributes, e.timestamp) for e in span.events],
        name=valid_utf8(span.name),
        status=Status(status.status_code, valid_utf8(status.description))
        if status.description
        else status,
    )


def copied(
    span: ReadableSpan,
    attributes: Mapping[str, Any],
    events: Sequence[Event] | None = None,
    *,
    name: str | None = None,
    status: Status | None = None,
) -> ReadableSpan:
    """An ended span again, with these attributes (and events, name, status).

    SDK spans are immutable.
    """
    return ReadableSpan(
        name=span.name if name is None else name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=BoundedAttributes(attributes=attributes, immutable=True),
        events=span.events if events is None else events,
        links=span.links,
        kind=span.kind,
        status=span.status if status is None else status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )
