"""Forwarding: a bounded buffer drained to each upstream in batches, with retries.

Each upstream has a `BatchSender` (`tracefact._batching`, the machine under the export
stage and the result sinks too) whose transport is an `UpstreamSender`. Every span handed
to `Forwarder.send` either reaches every upstream or is counted in
`tracefact.collector.upstream.failed` and logged: an upstream that is down holds its
spans and retries them with backoff until the drain deadline, a permanent refusal (a
400) is counted as `rejected`, and spans still held when the drain deadline passes are
counted as `shutdown` (their `on_done` hears they were cut off: a durable queue then
keeps their entry for another consumer instead of acknowledging it). During the drain
every upstream call is bounded by the time left; a call already under way when the
drain began (bounded only by the upstream's timeout) is abandoned at the deadline, its
spans counted as `shutdown`, so the process exits in time. The buffer is bounded in
spans and bytes; the receivers refuse new data (429) while it is full, so a long outage
fills it and then pushes back on the clients.

Payloads are encoded `ExportTraceServiceRequest`s. A batch is their concatenation: in
protobuf's wire format concatenated messages merge, and repeated fields (the request's
`resource_spans`) append, so batching costs no decoding.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracefact import semconv
from tracefact._batching import BatchOptions, BatchSender, Loss, Transport
from tracefact._clock import SYSTEM, Clock
from tracefact._imports import import_extra
from tracefact._retry import Attempt, Backoff, Retries, failed_attempt
from tracefact.collector.config import Forwarding, Upstream
from tracefact.collector.metrics import CollectorMetrics
from tracefact.collector.upstream_http import HttpUpstream, accepted
from tracefact.scrubbing import clean_text

logger = logging.getLogger("tracefact.collector")

GRPC_EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
"""The OTLP/gRPC method, called with encoded bytes (no (de)serializer)."""
_GRPC_TRANSIENT = frozenset(
    {
        "CANCELLED",
        "DEADLINE_EXCEEDED",
        "RESOURCE_EXHAUSTED",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNAVAILABLE",
        "DATA_LOSS",
    }
)
"""The codes OpenTelemetry's exporters retry."""


class GrpcUpstream:
    """OTLP/gRPC; the body goes out as encoded, with the headers as metadata."""

    def __init__(self, upstream: Upstream, retry_max_seconds: float) -> None:
        grpc = import_extra("grpc", "collector")
        self._grpc = grpc
        target = upstream.endpoint
        secure = target.startswith("https://")
        target = target.removeprefix("https://").removeprefix("http://").rstrip("/")
        # gRPC's own reconnect backoff grows to two minutes: after an outage the channel
        # would refuse calls long after the upstream is back. Ours decides the waits.
        options = [
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", max(100, int(retry_max_seconds * 1000))),
        ]
        self._channel = (
            grpc.secure_channel(target, grpc.ssl_channel_credentials(), options)
            if secure
            else grpc.insecure_channel(target, options)
        )
        self._call = self._channel.unary_unary(GRPC_EXPORT_METHOD)  # bytes in, bytes out
        self._metadata = tuple((k.lower(), v) for k, v in upstream.headers.items())
        self._compression = grpc.Compression.Gzip if upstream.compression == "gzip" else None

    def export(self, body: bytes, timeout: float) -> Attempt:
        try:
            reply = self._call(
                body,
                timeout=timeout,
                metadata=self._metadata,
                compression=self._compression,
            )
        except self._grpc.RpcError as exc:
            code = exc.code()
            name = code.name if code is not None else "UNKNOWN"
            return Attempt(False, name in _GRPC_TRANSIENT, f"gRPC {name}: {exc.details()}")
        return accepted(reply)

    def close(self) -> None:
        self._channel.close()


@dataclass(slots=True)
class Parcel:
    """Encoded spans on their way; `on_done` runs once every upstream is done with them.

    It is told whether they were cut off by the drain deadline before some upstream had
    them (else they were sent, or refused for good).
    """

    payload: bytes
    spans: int
    on_done: Callable[[bool], None] | None
    left: int = 0
    cut: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


def _cut(parcel: Parcel) -> None:
    """The drain deadline took `parcel` from an upstream before it had it."""
    with parcel.lock:
        parcel.cut = True


class UpstreamSender(Transport[Parcel, bytes]):
    """One upstream's transport: a batch of parcels is one request, their concatenation."""

    def __init__(
        self,
        upstream: Upstream,
        options: Forwarding,
        metrics: CollectorMetrics,
        done: Callable[[Parcel], None],
    ) -> None:
        self.name = clean_text(upstream.endpoint)  # a metric label and log field: no password
        self.client: HttpUpstream | GrpcUpstream = (
            GrpcUpstream(upstream, options.retry_max_seconds)
            if upstream.protocol == "grpc"
            else HttpUpstream(upstream)
        )
        self.timeout = upstream.timeout_seconds
        self.metrics = metrics
        self.attributes = {"upstream": self.name}
        self._done = done

    def requests(self, batch: list[Parcel]) -> Iterable[tuple[Sequence[Parcel], bytes]]:
        return [(batch, b"".join(p.payload for p in batch))]

    def send(self, request: bytes, timeout: float | None) -> Attempt:
        return self.client.export(request, self.timeout if timeout is None else timeout)

    def delivered(self, items: Sequence[Parcel], attempt: Attempt) -> None:
        spans = sum(p.spans for p in items)
        rejected = min(attempt.rejected, spans)
        self.metrics.forwarded.add(spans - rejected, self.attributes)
        if rejected:
            self._lost(rejected, semconv.UPSTREAM_REJECTED, attempt.error)
        for parcel in items:
            self._done(parcel)

    def lost(self, items: Sequence[Parcel], reason: Loss, error: str) -> None:
        if reason == "failed" and len(items) > 1:
            items = self._refused_alone(items)
            if not items:
                return
        shutdown = reason == "shutdown"
        upstream_reason = semconv.UPSTREAM_SHUTDOWN if shutdown else semconv.UPSTREAM_REJECTED
        self._lost(sum(p.spans for p in items), upstream_reason, error)
        for parcel in items:
            if shutdown:
                _cut(parcel)
            self._done(parcel)

    def _refused_alone(self, items: Sequence[Parcel]) -> list[Parcel]:
        """Each parcel of a refused batch sent alone, once; those refused again.

        A batch joins requests of several clients: one that the upstream cannot take (a
        span id of the wrong length, say) must not cost the others their spans.
        """
        refused = []
        for parcel in items:
            try:
                attempt = self.client.export(parcel.payload, self.timeout)
            except Exception as exc:
                attempt = failed_attempt(exc)
            if attempt.ok:
                self.delivered([parcel], attempt)
            else:
                refused.append(parcel)
        return refused

    def retrying(self, items: Sequence[Parcel], retries: int, error: str) -> None:
        self.metrics.retries.add(1, self.attributes)
        if retries == 1:
            logger.warning(
                "upstream failed; holding and retrying",
                extra={"event": "upstream_retry", "upstream": self.name, "error": error},
            )

    def _lost(self, spans: int, reason: str, error: str) -> None:
        self.metrics.failed.add(spans, {**self.attributes, "reason": reason})
        logger.error(
            "spans not forwarded",
            extra={
                "event": "upstream_failed",
                "upstream": self.name,
                "reason": reason,
                "spans": spans,
                "error": error,
            },
        )


def _spans(parcel: Parcel) -> int:
    return parcel.spans


class Forwarder:
    """Hands each parcel to every upstream's sender; bounded in spans and bytes held."""

    def __init__(
        self,
        upstreams: Sequence[Upstream],
        options: Forwarding,
        metrics: CollectorMetrics,
        clock: Clock = SYSTEM,
    ) -> None:
        self.options = options
        self.clock = clock
        batching = BatchOptions(
            max_queue=None,  # bounded here, across upstreams, in spans and bytes
            max_batch=options.batch_spans,
            delay_seconds=options.delay_seconds,
            retries=Retries(None, Backoff(options.retry_base_seconds, options.retry_max_seconds)),
        )
        self.upstreams = [UpstreamSender(u, options, metrics, self._finished) for u in upstreams]
        self.senders = [
            BatchSender(t, batching, name="tracefact-forward", weight=_spans, clock=clock)
            for t in self.upstreams
        ]
        self._lock = threading.Lock()  # guards the two totals
        self.spans = 0
        self.bytes = 0

    def start(self) -> None:
        """Nothing to start: each sender's thread starts with its first parcel."""

    def full(self) -> bool:
        """At a bound: the receivers refuse new requests until it drains."""
        return self.spans >= self.options.max_spans or self.bytes >= self.options.max_bytes

    def send(self, payload: bytes, spans: int, on_done: Callable[[bool], None] | None) -> None:
        """Queue encoded spans for every upstream. Never blocks, never refuses."""
        parcel = Parcel(payload, spans, on_done, left=len(self.senders))
        with self._lock:
            self.spans += spans
            self.bytes += len(payload)
        for sender, upstream in zip(self.senders, self.upstreams, strict=True):
            if sender.submit(parcel) is not None:  # only once the drain deadline passed
                upstream.lost([parcel], "shutdown", "received after the drain deadline")

    def _finished(self, parcel: Parcel) -> None:
        with parcel.lock:
            parcel.left -= 1
            last = parcel.left == 0
            cut = parcel.cut
        if not last:
            return
        with self._lock:
            self.spans -= parcel.spans
            self.bytes -= len(parcel.payload)
        if parcel.on_done is not None:
            parcel.on_done(cut)

    def close(self, deadline: float) -> None:
        """Send what is held until `deadline` (this forwarder's clock); count the rest lost."""
        for sender in self.senders:
            sender.close(deadline)
        for sender in self.senders:
            sender.join(deadline)
        for upstream in self.upstreams:
            upstream.client.close()  # a call abandoned at the deadline fails, uncounted

    @staticmethod
    def describe(upstreams: Sequence[Upstream]) -> list[dict[str, Any]]:
        return [{"endpoint": clean_text(u.endpoint), "protocol": u.protocol} for u in upstreams]
