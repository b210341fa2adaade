"""`HTTPSink`: the delivery machinery every HTTP result sink shares.

A sink thread, like OpenTelemetry's BatchSpanProcessor: `submit` appends to a bounded
queue under a lock and returns; the thread sends batches every `schedule_delay_seconds`
(at once when `max_batch_size` results wait or a flush asks), retries transient
failures with backoff on a schedule of their own, so one result waiting for its trace
to reach the backend does not hold up the next batch, and counts every result once as
delivered, failed or dropped. Subclasses only say how a batch becomes requests.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import httpx
from opentelemetry.metrics import MeterProvider

from tracefact._otel import reset_after_fork, run_suppressed
from tracefact._retry import Backoff, is_transient_status, retry_after_seconds
from tracefact.sinks.base import EvaluatedSpan
from tracefact.sinks.metrics import SinkMetrics, SinkOutcome

logger = logging.getLogger("tracefact")

Delivery = tuple[Sequence[EvaluatedSpan], httpx.Request]
"""One request and the results it carries; retried as a whole."""


@dataclass
class _Unit:
    results: Sequence[EvaluatedSpan]
    request: httpx.Request
    attempt: int = 0
    due: float = 0.0


class HTTPSink(ABC):
    """Batches, sends and retries results on its own thread.

    Never blocks or raises into the pipeline.

    max_retries / backoff_seconds / max_backoff_seconds: a request that fails
        transiently (connection errors, timeouts, 408, 425, 429, 5xx, and 404 where
        `retry_not_found`) is tried again after an exponentially growing, fully
        jittered delay, or the server's Retry-After (`tracefact._retry`).
    queue_size: results waiting at once; past it new results are dropped and counted.
    drain_seconds: how long `shutdown` keeps delivering.
    """

    name: str = "http"
    retry_not_found = False
    """404 means "not there yet" (the span's trace is still on its way), worth retrying."""

    def __init__(
        self,
        endpoint: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout_seconds: float = 10.0,
        max_batch_size: int = 100,
        schedule_delay_seconds: float = 1.0,
        queue_size: int = 2048,
        max_retries: int = 6,
        backoff_seconds: float = 0.5,
        max_backoff_seconds: float = 10.0,
        drain_seconds: float = 10.0,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        if max_batch_size < 1 or queue_size < 1 or max_retries < 0:
            raise ValueError("max_batch_size and queue_size must be positive, max_retries >= 0")
        self.endpoint = endpoint.rstrip("/")
        self.headers = dict(headers or {})
        self.timeout_seconds = timeout_seconds
        self.max_batch_size = max_batch_size
        self.schedule_delay_seconds = schedule_delay_seconds
        self.queue_size = queue_size
        self.max_retries = max_retries
        self.backoff = Backoff(backoff_seconds, max_backoff_seconds)
        self.drain_seconds = drain_seconds
        self._metrics = SinkMetrics(self.name, meter_provider)
        self._reset()
        reset_after_fork(self._reset)

    @abstractmethod
    def deliveries(
        self, client: httpx.Client, batch: Sequence[EvaluatedSpan]
    ) -> Iterable[Delivery]:
        """The requests that carry `batch` (built with `client.build_request`)."""

    def _reset(self) -> None:
        """Fresh state; also run in a forked child, which starts its own thread."""
        # The condition's lock guards every field below; no request is sent while it is held.
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[EvaluatedSpan] = deque()
        self._batch_due = 0.0
        self._retries: list[_Unit] = []
        self._pending = 0  # accepted and not yet delivered or failed
        self._flushing = 0  # callers waiting in force_flush: send without waiting for a batch
        self._stopping = False
        self._closed = False
        self._overflowing = False
        self._thread: threading.Thread | None = None

    # --- pipeline side ----------------------------------------------------------------------
    def submit(self, evaluated: EvaluatedSpan) -> None:
        with self._cond:
            if self._closed or len(self._queue) >= self.queue_size:
                dropped, first = True, not self._overflowing
                self._overflowing = True
            else:
                dropped = first = False
                if not self._queue:
                    self._batch_due = time.monotonic() + self.schedule_delay_seconds
                self._queue.append(evaluated)
                self._pending += 1
                if self._thread is None:
                    # Suppressed: the sink's own requests are never traced (httpx instrumented).
                    self._thread = threading.Thread(
                        target=run_suppressed(self._run),
                        name=f"tracefact-sink-{self.name}",
                        daemon=True,
                    )
                    self._thread.start()
                if len(self._queue) >= self.max_batch_size:
                    self._cond.notify_all()
        if dropped:
            self._metrics.count("dropped", 1)
            if first:
                logger.warning(
                    "tracefact: sink %s is full or shut down; dropping results", self.name
                )

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        deadline = time.monotonic() + timeout_millis / 1000
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(
                    lambda: self._pending == 0, max(0.0, deadline - time.monotonic())
                )
            finally:
                self._flushing -= 1

    def shutdown(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
        self.force_flush(int(self.drain_seconds * 1000))
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(self.timeout_seconds + 1.0)
        with self._cond:
            left = self._pending
            self._queue.clear()
            self._retries.clear()
            self._pending = 0
        if left:
            self._metrics.count("failed", left)
            logger.warning("tracefact: sink %s shut down with %d undelivered", self.name, left)

    # --- sink thread ------------------------------------------------------------------------
    def _run(self) -> None:
        with httpx.Client(
            base_url=self.endpoint, headers=self.headers, timeout=self.timeout_seconds
        ) as client:
            while True:
                batch, due = self._next_work()
                if batch is None:
                    return
                units = [*due, *(_Unit(r, q) for r, q in self._build(client, batch))]
                for unit in units:
                    self._send(client, unit)

    def _next_work(self) -> tuple[list[EvaluatedSpan] | None, list[_Unit]]:
        """Wait until a batch is due, a retry is due, or it is time to stop (batch None)."""
        with self._cond:
            while True:
                now = time.monotonic()
                if self._stopping:
                    return None, []
                due = [u for u in self._retries if u.due <= now]
                send_now = self._queue and (
                    self._flushing
                    or now >= self._batch_due
                    or len(self._queue) >= self.max_batch_size
                )
                if due or send_now:
                    self._retries = [u for u in self._retries if u.due > now]
                    size = min(len(self._queue), self.max_batch_size) if send_now else 0
                    batch = [self._queue.popleft() for _ in range(size)]
                    if self._queue:
                        self._batch_due = now + self.schedule_delay_seconds
                    self._overflowing = self._overflowing and bool(self._queue)
                    return batch, due
                wakeups = [u.due for u in self._retries]
                if self._queue:
                    wakeups.append(self._batch_due)
                self._cond.wait(max(0.0, min(wakeups) - now) if wakeups else None)

    def _build(self, client: httpx.Client, batch: list[EvaluatedSpan]) -> list[Delivery]:
        if not batch:
            return []
        try:
            return list(self.deliveries(client, batch))
        except Exception:  # a bug in building requests must not kill the thread
            logger.exception("tracefact: sink %s could not build its requests", self.name)
            self._settle("failed", len(batch))
            return []

    def _send(self, client: httpx.Client, unit: _Unit) -> None:
        try:
            response = client.send(unit.request)
        except httpx.TransportError as exc:
            self._retry_or_fail(unit, f"{type(exc).__name__}: {exc}", None)
            return
        if response.is_success:
            self._settle("delivered", len(unit.results))
        elif is_transient_status(response.status_code) or (
            response.status_code == 404 and self.retry_not_found
        ):
            self._retry_or_fail(unit, _describe(response), retry_after_seconds(response.headers))
        else:
            self._fail(unit, _describe(response))

    def _retry_or_fail(self, unit: _Unit, reason: str, retry_after: float | None) -> None:
        if unit.attempt >= self.max_retries:
            self._fail(unit, f"{reason} (after {unit.attempt} retries)")
            return
        delay = self.backoff.delay(unit.attempt, retry_after)
        unit.attempt += 1
        unit.due = time.monotonic() + delay
        with self._cond:
            self._retries.append(unit)

    def _fail(self, unit: _Unit, reason: str) -> None:
        logger.warning(
            "tracefact: sink %s could not deliver %d result(s): %s",
            self.name,
            len(unit.results),
            reason,
        )
        self._settle("failed", len(unit.results))

    def _settle(self, outcome: SinkOutcome, results: int) -> None:
        self._metrics.count(outcome, results)
        with self._cond:
            self._pending -= results
            self._cond.notify_all()


def _describe(response: httpx.Response) -> str:
    return f"HTTP {response.status_code} from {response.request.url}: {response.text[:200]}"
