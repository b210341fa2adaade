"""`ExportProcessor`: the export stage, where spans leave for an exporter in batches.

OpenTelemetry's BatchSpanProcessor drops spans with a log line at most, and its flush
may outlast its timeout. This one is a `BatchSender` (`tracefact._batching`: a bounded
queue and one thread, suppressed, fork-safe) with three promises:
- every span that never reaches the exporter is counted in `tracefact.export.dropped`
  by reason, where it is lost: queue full, exporter failed, the drain deadline passed;
- `force_flush` and `shutdown` return within their timeouts even when the exporter
  hangs, and `force_flush` is True only if nothing handed in was lost;
- a span that ends while shutdown drains is still exported, not silently refused.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterable, Sequence
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import TraceFlags

from tracefact import semconv
from tracefact._batching import BatchOptions, BatchSender, Loss, Transport
from tracefact._clock import SYSTEM, Clock
from tracefact._otel import with_valid_text
from tracefact._retry import Attempt
from tracefact.instrument.pending import finished
from tracefact.pipeline.metrics import process_metrics

_SAMPLED = TraceFlags.SAMPLED

logger = logging.getLogger("tracefact")

_DROP_REASONS: dict[str, str] = {
    "full": semconv.EXPORT_DROP_QUEUE_FULL,
    "failed": semconv.EXPORT_DROP_FAILED,
    "shutdown": semconv.EXPORT_DROP_SHUTDOWN,
}


class _Exports(Transport[ReadableSpan, Sequence[ReadableSpan]]):
    """The export stage's transport: a batch is one export call; a loss is counted.

    Content left pending on the application's thread is finished here, on the export
    thread, before the exporter sees it (`instrument.pending`).
    """

    def __init__(self, exporter: SpanExporter, dropped: Callable[[str, int], None]) -> None:
        self.exporter = exporter
        self._dropped = dropped

    def requests(
        self, batch: list[ReadableSpan]
    ) -> Iterable[tuple[Sequence[ReadableSpan], Sequence[ReadableSpan]]]:
        return [(batch, [finished(span) for span in batch])]

    def send(self, request: Sequence[ReadableSpan], timeout: float | None) -> Attempt:
        try:
            try:
                exported = self.exporter.export(request) == SpanExportResult.SUCCESS
            except UnicodeEncodeError:  # a lone surrogate where the encoders refuse one
                repaired = [with_valid_text(span) for span in request]
                exported = self.exporter.export(repaired) == SpanExportResult.SUCCESS
        except Exception as exc:
            logger.exception("tracefact: exporter %s failed", type(self.exporter).__name__)
            return Attempt(False, error=f"{type(exc).__name__}: {exc}")
        return Attempt(exported, error="" if exported else "the exporter reported failure")

    def delivered(self, items: Sequence[ReadableSpan], attempt: Attempt) -> None:
        pass

    def lost(self, items: Sequence[ReadableSpan], reason: Loss, error: str) -> None:
        self._dropped(_DROP_REASONS[reason], len(items))


class ExportProcessor(SpanProcessor):
    """Batches ended spans to `exporter` from a queue of at most `max_queue_size` spans.

    A batch leaves when `max_batch_size` spans wait, after `schedule_delay_seconds`,
    or on `force_flush`. `shutdown` drains for up to `drain_seconds`
    (`shutdown_timeout_seconds` is its former name, still accepted).
    """

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        max_queue_size: int = 2048,
        max_batch_size: int = 512,
        schedule_delay_seconds: float = 1.0,
        drain_seconds: float = 10.0,
        shutdown_timeout_seconds: float | None = None,
        meter_provider: MeterProvider | None = None,
        clock: Clock = SYSTEM,
    ) -> None:
        if shutdown_timeout_seconds is not None:
            drain_seconds = shutdown_timeout_seconds
        if schedule_delay_seconds <= 0 or drain_seconds <= 0:
            raise ValueError("schedule_delay_seconds and drain_seconds must be positive")
        self.exporter = exporter
        self.drain_seconds = drain_seconds
        self._metrics = process_metrics(meter_provider)
        self._warned = threading.Event()
        options = BatchOptions(
            max_queue=max_queue_size,
            max_batch=min(max_batch_size, max_queue_size),
            delay_seconds=schedule_delay_seconds,
        )
        transport = _Exports(exporter, self._dropped)
        self._sender = BatchSender(transport, options, name="tracefact-export", clock=clock)
        self._offer = self._sender.offer  # bound once: every span of the process comes here
        self._closed = False

    # --- application threads ------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        try:  # every span of the process comes here: the SDK's tuple read without properties
            sampled = span._context[3] & _SAMPLED  # type: ignore[index]  # SpanContext.trace_flags
        except (AttributeError, TypeError):  # not the SDK's span, or no context
            context = span.context
            sampled = context is not None and context.trace_flags & _SAMPLED
        if not sampled:
            return
        refused = self._offer(span)
        if refused is not None:
            self._dropped(_DROP_REASONS[refused], 1)

    def _dropped(self, reason: str, count: int) -> None:
        self._metrics.export_dropped(reason, count)
        if not self._warned.is_set():
            self._warned.set()
            logger.warning(
                "tracefact: %d span(s) not exported (%s); counted in %s from now on",
                count,
                reason,
                semconv.METRIC_EXPORT_DROPPED,
            )

    # --- lifecycle ----------------------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export what is queued now, waiting at most `timeout_millis`.

        True only if all of it, and every span handed in since the last flush that
        answered, reached the exporter in time.
        """
        accounted, lost = self._sender.flush(timeout_millis / 1000)
        return accounted and lost == 0

    def shutdown(self) -> None:
        """Export what is queued within `drain_seconds`; count the rest as lost."""
        if self._closed:
            return
        self._closed = True
        self._sender.shutdown(self.drain_seconds)
        try:
            self.exporter.shutdown()
        except Exception:
            logger.exception("tracefact: exporter %s failed to shut down", type(self.exporter))


class Unreachable(SpanExporter):
    """An exporter that fails at once, and says where, while nothing listens at its endpoint.

    OTLP's exporter retries a refused connection with backoff for its whole timeout and
    logs every try, so a script run with nothing listening (the default endpoint is
    localhost:4318) waits seconds at exit and prints lines that do not say what to do.
    Before its first export, and after a failed one, this one opens a TCP connection to
    the endpoint: while that is refused the batch fails without a call, and one warning
    names the endpoint and the settings that change it. Once it connects, `exporter`
    exports as usual (its own retries then cover a backend that went away).
    """

    def __init__(self, exporter: SpanExporter, endpoint: str, probe_seconds: float = 1.0) -> None:
        self.exporter = exporter
        self.endpoint = endpoint
        self.probe_seconds = probe_seconds
        self._checked = False  # the endpoint answered since the last failure
        self._warned = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not self._checked:
            refusal = self._refusal()
            if refusal is not None:
                self._warn(refusal)
                return SpanExportResult.FAILURE
            self._checked = True
        result = self.exporter.export(spans)
        self._checked = result == SpanExportResult.SUCCESS
        return result

    def _refusal(self) -> str | None:
        """Why no connection to the endpoint opens now, or None when one does."""
        parts = urlsplit(self.endpoint)
        host = parts.hostname or "localhost"
        if parts.scheme in getproxies() and not proxy_bypass(host):
            return None  # through a proxy: only the export can tell
        default = 443 if parts.scheme == "https" else 80
        try:
            with socket.create_connection((host, parts.port or default), self.probe_seconds):
                return None
        except OSError as exc:
            return exc.strerror or type(exc).__name__

    def _warn(self, refusal: str) -> None:
        if self._warned:
            return
        self._warned = True
        logger.warning(
            "tracefact: nothing answers at %s (%s), so spans are not exported there. Start "
            "a collector or backend there, or set configure(endpoint=...) / "
            "OTEL_EXPORTER_OTLP_ENDPOINT, or exporter='console' (TRACEFACT_EXPORTER).",
            self.endpoint,
            refusal.lower(),
        )

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)
