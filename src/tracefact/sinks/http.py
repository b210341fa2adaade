"""`HTTPSink`: the delivery machinery every HTTP result sink shares.

A `BatchSender` (`tracefact._batching`, the same machine as the export stage's and the
collector's forwarder): `submit` appends to a bounded queue and returns; the sender's
thread sends batches every `schedule_delay_seconds` (at once when `max_batch_size`
results wait or a flush asks), retries transient failures with backoff on a schedule of
their own, so one result waiting for its trace to reach the backend does not hold up the
next batch, and every result is counted once as delivered, failed or dropped.
Subclasses only say how a batch becomes requests.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence

import httpx
from opentelemetry.metrics import MeterProvider

from tracefact import semconv
from tracefact._batching import BatchOptions, BatchSender, Loss, Transport
from tracefact._clock import SYSTEM, Clock
from tracefact._otel import reset_after_fork
from tracefact._retry import Attempt, Backoff, Retries, attempt_of, failed_attempt
from tracefact.sinks.base import EvaluatedSpan
from tracefact.sinks.metrics import SinkMetrics, SinkOutcome

logger = logging.getLogger("tracefact")

SinkRequest = tuple[Sequence[EvaluatedSpan], httpx.Request]
"""One request and the results it carries; retried as a whole."""
Delivery = SinkRequest
"""The former name of `SinkRequest`, kept for sinks written against it."""


class _Requests(Transport[EvaluatedSpan, httpx.Request]):
    """A sink's transport: its requests sent with one client, outcomes counted by the sink."""

    def __init__(self, sink: HTTPSink) -> None:
        self.sink = sink
        self.client: httpx.Client | None = None  # the sender thread's; made on first use
        reset_after_fork(self.forget_client)

    def forget_client(self) -> None:
        """A forked child builds its own client (the parent's connections are not its)."""
        self.client = None

    def requests(self, batch: list[EvaluatedSpan]) -> Iterable[SinkRequest]:
        sink = self.sink
        if self.client is None:
            self.client = httpx.Client(
                base_url=sink.endpoint, headers=sink.headers, timeout=sink.timeout_seconds
            )
        return list(sink.deliveries(self.client, batch))

    def send(self, request: httpx.Request, timeout: float | None) -> Attempt:
        assert self.client is not None  # built with the request
        if timeout is not None:  # draining: no call outlasts the deadline
            request.extensions["timeout"] = httpx.Timeout(timeout).as_dict()
        try:
            response = self.client.send(request)
        except httpx.TransportError as exc:
            return failed_attempt(exc)
        return attempt_of(response, retry_not_found=self.sink.retry_not_found)

    def delivered(self, items: Sequence[EvaluatedSpan], attempt: Attempt) -> None:
        self.sink.count("delivered", len(items))
        for evaluated in items:
            evaluated.settle()

    def lost(self, items: Sequence[EvaluatedSpan], reason: Loss, error: str) -> None:
        name = self.sink.name
        logger.warning(
            "tracefact: sink %s could not deliver %d result(s): %s", name, len(items), error
        )
        self.sink.count("failed", len(items))
        for evaluated in items:
            evaluated.settle(cut=reason == "shutdown")

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


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
        clock: Clock = SYSTEM,
    ) -> None:
        if max_batch_size < 1 or queue_size < 1 or max_retries < 0:
            raise ValueError("max_batch_size and queue_size must be positive, max_retries >= 0")
        self.endpoint = endpoint.rstrip("/")
        self.headers = dict(headers or {})
        self.timeout_seconds = timeout_seconds
        self.drain_seconds = drain_seconds
        self._metrics = SinkMetrics(self.name, meter_provider)
        self._metrics_chosen = meter_provider is not None
        self._overflowing = threading.Event()  # warned about refusals once per overflow
        self._transport = _Requests(self)
        options = BatchOptions(
            max_queue=queue_size,
            max_batch=max_batch_size,
            delay_seconds=schedule_delay_seconds,
            retries=Retries(max_retries, Backoff(backoff_seconds, max_backoff_seconds)),
            timeout_seconds=timeout_seconds,
        )
        name = f"tracefact-sink-{self.name}"
        self._sender = BatchSender(self._transport, options, name=name, clock=clock)

    def use_meter_provider(self, meter_provider: MeterProvider) -> None:
        """Count in the pipeline's meter provider (`configure`'s), unless given one here."""
        if not self._metrics_chosen:
            self._metrics = SinkMetrics(self.name, meter_provider)

    @abstractmethod
    def deliveries(
        self, client: httpx.Client, batch: Sequence[EvaluatedSpan]
    ) -> Iterable[SinkRequest]:
        """The requests that carry `batch` (built with `client.build_request`)."""

    def count(self, outcome: SinkOutcome, results: int) -> None:
        """Count results in `tracefact.sink.results` by this sink's name and `outcome`."""
        self._metrics.count(outcome, results)

    # --- pipeline side ----------------------------------------------------------------------
    def submit(self, evaluated: EvaluatedSpan) -> None:
        refusal = self._sender.submit(evaluated)
        if refusal is None:
            self._overflowing.clear()
            return
        self.count("dropped", 1)
        evaluated.settle(cut=refusal == semconv.REFUSED_SHUTDOWN)
        if not self._overflowing.is_set():
            self._overflowing.set()
            logger.warning("tracefact: sink %s is full or shut down; dropping results", self.name)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        accounted, _ = self._sender.flush(timeout_millis / 1000)
        return accounted

    def shutdown(self) -> None:
        self._sender.shutdown(self.drain_seconds)
        self._transport.close()
