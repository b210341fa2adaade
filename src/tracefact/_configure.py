"""`configure`, `force_flush` and `shutdown`: wiring tracefact into OpenTelemetry.

tracefact adds one span processor to the tracer provider (its own, or one the
application already set globally) and never replaces a provider. Calling
`configure` again swaps what sits behind that one processor.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)

from tracefact.config import Settings
from tracefact.instrument.capture import CaptureOptions, Redactor, set_capture_options

logger = logging.getLogger("tracefact")


class _NoopProcessor(SpanProcessor):
    """What stands behind the switch when spans should go nowhere."""


class _SwitchProcessor(SpanProcessor):
    """The one processor tracefact adds to a provider; forwards to a replaceable chain."""

    def __init__(self, current: SpanProcessor) -> None:
        self._current = current

    def replace(self, new: SpanProcessor) -> SpanProcessor:
        old, self._current = self._current, new
        return old

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._current.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        self._current.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._current.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self._current.shutdown()


class _Installation:
    def __init__(self, provider: TracerProvider, switch: _SwitchProcessor) -> None:
        self.provider = provider
        self.switch = switch


_lock = threading.Lock()  # configure/shutdown may be called from several threads
_installation: _Installation | None = None
_atexit_registered = False


def configure(
    *,
    service_name: str | None = None,
    exporter: str | SpanExporter | None = None,
    endpoint: str | None = None,
    headers: dict[str, str] | None = None,
    resource_attributes: dict[str, str] | None = None,
    capture_content: bool | None = None,
    max_attribute_length: int | None = None,
    redact: Redactor | None = None,
    tracer_provider: TracerProvider | None = None,
) -> TracerProvider:
    """Set tracefact up; arguments left out come from `TRACEFACT_*` variables, then defaults.

    exporter: "otlp" (OTLP/HTTP protobuf, honouring OTEL_EXPORTER_OTLP_*), "console",
    "none", or any SpanExporter. With an SDK tracer provider already set globally (or
    one passed as `tracer_provider`, which becomes the global one if none is set),
    tracefact adds its processor to it instead of creating one. Safe to call again:
    the new settings replace the old ones.
    """
    global _installation, _atexit_registered
    explicit: dict[str, Any] = {
        "service_name": service_name,
        "exporter": exporter if isinstance(exporter, str) else None,
        "endpoint": endpoint,
        "headers": headers,
        "resource_attributes": resource_attributes,
        "capture_content": capture_content,
        "max_attribute_length": max_attribute_length,
    }
    settings = Settings(**{k: v for k, v in explicit.items() if v is not None})
    set_capture_options(
        CaptureOptions(
            capture_content=settings.capture_content,
            max_attribute_length=settings.max_attribute_length,
            redact=redact,
        )
    )
    processor = _export_processor(
        exporter if isinstance(exporter, SpanExporter) else None, settings
    )
    with _lock:
        provider = tracer_provider or _global_sdk_provider() or _new_provider(settings)
        if _global_sdk_provider() is None:
            trace.set_tracer_provider(provider)  # decorators trace through the global one
        if _installation is not None and _installation.provider is provider:
            old = _installation.switch.replace(processor)
        else:
            if _installation is not None:
                old_switch = _installation.switch
                old = old_switch.replace(_NoopProcessor())
            else:
                old = _NoopProcessor()
            switch = _SwitchProcessor(processor)
            provider.add_span_processor(switch)
            _installation = _Installation(provider, switch)
        if not _atexit_registered:
            atexit.register(shutdown)
            _atexit_registered = True
    old.shutdown()  # outside the lock: flushing may take a while
    return provider


def force_flush(timeout_millis: int = 30000) -> bool:
    """Export everything tracefact holds; False if the timeout passed first."""
    installation = _installation
    return True if installation is None else installation.switch.force_flush(timeout_millis)


def shutdown() -> None:
    """Flush and stop tracefact's processor; spans after this go nowhere. Idempotent."""
    installation = _installation
    if installation is not None:
        installation.switch.replace(_NoopProcessor()).shutdown()


def _global_sdk_provider() -> TracerProvider | None:
    provider = trace.get_tracer_provider()
    return provider if isinstance(provider, TracerProvider) else None


def _new_provider(settings: Settings) -> TracerProvider:
    attributes: dict[str, Any] = dict(settings.resource_attributes)
    if settings.service_name:
        attributes[SERVICE_NAME] = settings.service_name
    return TracerProvider(resource=Resource.create(attributes))


def _export_processor(exporter: SpanExporter | None, settings: Settings) -> SpanProcessor:
    if exporter is not None:
        return BatchSpanProcessor(exporter)
    if settings.exporter == "none":
        return _NoopProcessor()
    if settings.exporter == "console":
        return SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stdout))
    return BatchSpanProcessor(
        OTLPSpanExporter(endpoint=traces_endpoint(settings.endpoint), headers=settings.headers)
    )


def traces_endpoint(endpoint: str | None) -> str | None:
    """Accept a base URL (``http://host:4318``) as well as the full ``.../v1/traces``."""
    if endpoint is None:
        return None
    if urlsplit(endpoint).path.rstrip("/") in ("", "/"):
        return endpoint.rstrip("/") + "/v1/traces"
    return endpoint
