"""Content finished where spans leave tracefact, not on the application's thread.

Recorded text is redacted, scrubbed, cut to `max_attribute_length` and made valid UTF-8
(`capture.finish`) before anyone outside tracefact reads it. When tracefact owns every
processor of the provider (its one processor is the provider's only one, and each stage
behind it finishes content before handing a span on: `ExportProcessor`, the evaluation
processor in front of it), that work need not happen on the application's thread: a text
that needs no cut is recorded as it was when the call returned, its key listed in
`tracefact.content.pending` (the output's ahead of time: a key with no value is passed
over), and `finished` does the rest on the export or evaluation thread. Anywhere else
(another processor on the provider, a console exporter, a redactor, capture off) nothing
is deferred and content is finished as it is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from tracefact import semconv
from tracefact._otel import copied
from tracefact.instrument.capture import capture_options, finish


class _Owner:
    """The provider tracefact owns, and its processors as they were when that was decided."""

    __slots__ = ("processors", "provider")

    def __init__(self, provider: TracerProvider, processors: object) -> None:
        self.provider = provider
        self.processors = processors


_owner: _Owner | None = None


def set_owner(provider: TracerProvider | None, processor: SpanProcessor | None = None) -> None:
    """Defer content on `provider` while `processor` stays its only span processor.

    `None` (or a processor that does not finish content) defers nothing. Called by
    `configure` each time it installs or replaces what stands behind its processor.
    """
    global _owner
    processors = _processors(provider) if provider is not None else None
    if provider is None or processor is None or processors != (processor,):
        _owner = None
        return
    _owner = _Owner(provider, processors)


def deferred(provider: object) -> bool:
    """Whether spans of `provider` may carry pending content now (one identity check).

    A processor added to the provider since `set_owner` makes a new tuple of
    processors, and deferral stops at once.
    """
    owner = _owner
    if owner is None or owner.provider is not provider:
        return False
    try:  # `_processors` inlined: this runs as every decorated call starts
        processors = provider._active_span_processor._span_processors
    except AttributeError:
        return False
    return processors is owner.processors and capture_options().redact is None


def _processors(provider: TracerProvider) -> object:
    """The SDK's tuple of the provider's processors (None where the SDK keeps none)."""
    return getattr(getattr(provider, "_active_span_processor", None), "_span_processors", None)


def finished(span: ReadableSpan) -> ReadableSpan:
    """The span with its pending content finished (a copy), or the span itself.

    Asked of every exported span: the SDK's plain dict is checked, not its mapping, whose
    missing key costs a raised and caught KeyError.
    """
    attributes = getattr(getattr(span, "_attributes", None), "_dict", None)
    if type(attributes) is not dict:
        attributes = dict(span.attributes or {})
    if semconv.CONTENT_PENDING not in attributes:
        return span
    return copied(span, finished_attributes(attributes))


def finished_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """`attributes` with each pending key's text finished, as `capture.finish` does it.

    Paths the scrubber replaced something in are added to `tracefact.scrubbed` in the
    order they were recorded.
    """
    options = capture_options()
    out = dict(attributes)
    # The output is listed first (ahead of time) but recorded last: finished last.
    keys = sorted(str(out.pop(semconv.CONTENT_PENDING, "")).split(","), key=_output_last)
    scrubbed = list(out.get(semconv.SCRUBBED, ()))
    count = len(scrubbed)
    for key in keys:
        value = out.get(key)
        if isinstance(value, str):
            out[key] = finish(value, options, key, scrubbed)
        elif isinstance(value, (tuple, list)):
            out[key] = tuple(
                finish(text, options, f"{key}.{i}", scrubbed) if isinstance(text, str) else text
                for i, text in enumerate(value)
            )
    if len(scrubbed) > count:
        out[semconv.SCRUBBED] = scrubbed
    return out


def _output_last(key: str) -> bool:
    return key == semconv.OUTPUT_VALUE
