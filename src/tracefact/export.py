"""`ExportProcessor`: the export stage, where spans leave for an exporter in batches.

OpenTelemetry's BatchSpanProcessor drops spans with a log line at most, and its flush
may outlast its timeout. This one keeps the same shape (a bounded queue and one
worker thread) with three promises:
- every span that never reaches the exporter is counted in `tracefact.export.dropped`
  by reason, where it is lost: queue full, exporter failed, shutdown's timeout passed;
- `force_flush` and `shutdown` return within their timeouts even when the exporter
  hangs, and `force_flush` is True only if nothing handed in was lost;
- a span that ends while shutdown drains is still exported, not silently refused.
The exporter runs with instrumentation suppressed, so exporting traces nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from tracefact import semconv
from tracefact._otel import reset_after_fork, run_suppressed
from tracefact.pipeline.metrics import process_metrics

logger = logging.getLogger("tracefact")


class ExportProcessor(SpanProcessor):
    """Batches ended spans to `exporter` from a queue of at most `max_queue_size` spans.

    A batch leaves when `max_batch_size` spans wait, after `schedule_delay_seconds`,
    or on `force_flush`. `shutdown` drains for up to `shutdown_timeout_seconds`.
    """

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        max_queue_size: int = 2048,
        max_batch_size: int = 512,
        schedule_delay_seconds: float = 1.0,
        shutdown_timeout_seconds: float = 10.0,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        if max_queue_size < 1 or max_batch_size < 1:
            raise ValueError("max_queue_size and max_batch_size must be at least 1")
        if schedule_delay_seconds <= 0 or shutdown_timeout_seconds <= 0:
            raise ValueError("schedule_delay_seconds and shutdown_timeout_seconds must be positive")
        self.exporter = exporter
        self.max_queue_size = max_queue_size
        self.max_batch_size = min(max_batch_size, max_queue_size)
        self.schedule_delay_seconds = schedule_delay_seconds
        self.shutdown_timeout_seconds = shutdown_timeout_seconds
        self._metrics = process_metrics(meter_provider)
        self._reset()
        reset_after_fork(self._reset)

    def _reset(self) -> None:
        """Fresh state and worker; also run in a forked child, whose parent owns the queue."""
        self._changed = threading.Condition()  # guards the fields below
        self._queue: deque[ReadableSpan] = deque()
        self._accepted = 0  # spans queued, ever
        self._settled = 0  # of those, exported or counted lost
        self._in_flight = 0  # spans in the batch the exporter holds
        self._lost = 0  # spans lost, ever (full queue included)
        self._lost_reported = 0  # lost spans a force_flush already answered False for
        self._flush_to = 0  # export without waiting until this many spans are settled
        self._closing = False
        self._stopped = False  # the worker is gone: nothing will be exported any more
        self._warned = False
        self._worker = threading.Thread(
            target=run_suppressed(self._run), name="tracefact-export", daemon=True
        )
        self._worker.start()

    # --- application threads ------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is None or not span.context.trace_flags.sampled:
            return
        with self._changed:
            reason = semconv.EXPORT_DROP_SHUTDOWN if self._stopped else None
            if reason is None and len(self._queue) >= self.max_queue_size:
                reason = semconv.EXPORT_DROP_QUEUE_FULL
            if reason is None:
                self._queue.append(span)
                self._accepted += 1
                if len(self._queue) == self.max_batch_size:
                    self._changed.notify_all()
                return
            self._lost += 1
        self._dropped(reason, 1)

    def _dropped(self, reason: str, count: int) -> None:
        self._metrics.export_dropped(reason, count)
        if not self._warned:
            self._warned = True
            logger.warning(
                "tracefact: %d span(s) not exported (%s); counted in %s from now on",
                count,
                reason,
                semconv.METRIC_EXPORT_DROPPED,
            )

    # --- worker thread --------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(self._batch_due, self.schedule_delay_seconds)
                if self._closing and not self._queue:
                    self._stopped = True
                    self._changed.notify_all()
                    return
                count = min(self.max_batch_size, len(self._queue))
                batch = [self._queue.popleft() for _ in range(count)]
                self._in_flight = count
            if batch:
                self._export(batch)

    def _batch_due(self) -> bool:
        return (
            len(self._queue) >= self.max_batch_size
            or self._closing
            or (bool(self._queue) and self._settled + self._in_flight < self._flush_to)
        )

    def _export(self, batch: list[ReadableSpan]) -> None:
        try:
            delivered = self.exporter.export(batch) == SpanExportResult.SUCCESS
        except Exception:
            logger.exception("tracefact: exporter %s failed", type(self.exporter).__name__)
            delivered = False
        with self._changed:
            if self._in_flight == 0:  # shutdown gave up on this batch and counted it
                return
            self._in_flight = 0
            self._settled += len(batch)
            if not delivered:
                self._lost += len(batch)
            self._changed.notify_all()
        if not delivered:
            self._dropped(semconv.EXPORT_DROP_FAILED, len(batch))

    # --- lifecycle ----------------------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export what is queued now, waiting at most `timeout_millis`.

        True only if all of it, and every span handed in since the last flush that
        answered, reached the exporter in time.
        """
        with self._changed:
            target = self._accepted
            self._flush_to = max(self._flush_to, target)
            self._changed.notify_all()
            done = self._changed.wait_for(
                lambda: self._settled >= target or self._stopped, timeout_millis / 1000
            )
            delivered = done and self._settled >= target and self._lost == self._lost_reported
            self._lost_reported = self._lost
            return delivered

    def shutdown(self) -> None:
        """Export what is queued within `shutdown_timeout_seconds`; count the rest as lost."""
        deadline = time.monotonic() + self.shutdown_timeout_seconds
        with self._changed:
            if self._closing:
                return
            self._closing = True
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._stopped, self.shutdown_timeout_seconds)
            abandoned = len(self._queue) + self._in_flight
            self._queue.clear()
            self._in_flight = 0
            self._settled = self._accepted
            self._lost += abandoned
            self._stopped = True
            self._changed.notify_all()
        if abandoned:
            self._dropped(semconv.EXPORT_DROP_SHUTDOWN, abandoned)
        try:
            self.exporter.shutdown()
        except Exception:
            logger.exception("tracefact: exporter %s failed to shut down", type(self.exporter))
        self._worker.join(max(0.0, deadline - time.monotonic()))
