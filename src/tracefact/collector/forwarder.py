"""Forwarding: a bounded buffer drained to each upstream in batches, with retries.

Every span handed to `Forwarder.send` either reaches every upstream or is counted in
`tracefact.collector.upstream.failed` and logged: an upstream that is down holds its
spans and retries them with backoff (`tracefact._retry`), a permanent refusal (a 400) is
counted as `rejected`, and spans still held when the drain deadline passes are counted
as `shutdown` (their `on_done` hears they were cut off: a durable queue then keeps
their entry for another consumer instead of acknowledging it). During the drain
every upstream call is bounded by the time left; a call already under way when the
drain began (bounded only by the upstream's timeout) is abandoned at the deadline,
its spans counted as `shutdown`, so the process exits in time. The buffer is
bounded in spans and bytes; the receivers refuse new data (429) while it is full,
so a long outage fills it and then pushes back on the clients.

Payloads are encoded `ExportTraceServiceRequest`s. A batch is their concatenation: in
protobuf's wire format concatenated messages merge, and repeated fields (the request's
`resource_spans`) append, so batching costs no decoding.
"""

from __future__ import annotations

import gzip
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tracefact import semconv
from tracefact._imports import import_extra
from tracefact._retry import Backoff, is_transient_status, retry_after_seconds
from tracefact.collector.config import Forwarding, Upstream
from tracefact.collector.metrics import CollectorMetrics

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
_SETTLE_SECONDS = 0.25
"""How long past the drain deadline a sender may take to count its last call's outcome."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """One upstream call: sent, or why not and whether trying again may help."""

    ok: bool
    transient: bool = False
    error: str = ""
    retry_after: float | None = None
    rejected: int = 0
    """Accepted, but the upstream's partial success says it dropped this many spans."""


def accepted(reply: bytes) -> Outcome:
    """A 200 / OK: read OTLP's partial success, where a backend says what it dropped."""
    try:
        partial = ExportTraceServiceResponse.FromString(reply).partial_success
    except DecodeError:
        return Outcome(True)  # not protobuf (a JSON or empty body): nothing said
    if partial.rejected_spans <= 0:
        return Outcome(True)
    error = f"partial success: {partial.error_message or 'no message'}"
    return Outcome(True, error=error, rejected=int(partial.rejected_spans))


class HttpUpstream:
    """OTLP/HTTP protobuf with the upstream's headers."""

    def __init__(self, upstream: Upstream) -> None:
        endpoint = upstream.endpoint.rstrip("/")
        self.url = endpoint if endpoint.endswith("/v1/traces") else f"{endpoint}/v1/traces"
        self.gzip = upstream.compression == "gzip"
        headers = {**upstream.headers, "Content-Type": "application/x-protobuf"}
        if self.gzip:
            headers["Content-Encoding"] = "gzip"
        self._client = httpx.Client(headers=headers)

    def export(self, body: bytes, timeout: float) -> Outcome:
        try:
            response = self._client.post(
                self.url, content=gzip.compress(body) if self.gzip else body, timeout=timeout
            )
        except httpx.HTTPError as exc:
            return Outcome(False, True, f"{type(exc).__name__}: {exc}")
        if response.is_success:
            protobuf = "protobuf" in response.headers.get("content-type", "")
            return accepted(response.content) if protobuf else Outcome(True)
        error = f"HTTP {response.status_code}: {response.text[:200]}"
        if is_transient_status(response.status_code):
            return Outcome(False, True, error, retry_after_seconds(response.headers))
        return Outcome(False, False, error)

    def close(self) -> None:
        self._client.close()


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

    def export(self, body: bytes, timeout: float) -> Outcome:
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
            return Outcome(False, name in _GRPC_TRANSIENT, f"gRPC {name}: {exc.details()}")
        return accepted(reply)

    def close(self) -> None:
        self._channel.close()


@dataclass(slots=True)
class Parcel:
    """Encoded spans on their way; `on_done` runs once every upstream is done with them.

    It is told whether they were settled (sent, or refused for good) or cut off by the
    drain deadline before some upstream had them.
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


class Sender:
    """One upstream's queue and thread: batches, sends, retries while it may."""

    def __init__(
        self,
        upstream: Upstream,
        options: Forwarding,
        metrics: CollectorMetrics,
        done: Callable[[Parcel], None],
    ) -> None:
        self.name = upstream.endpoint
        self.client: HttpUpstream | GrpcUpstream = (
            GrpcUpstream(upstream, options.retry_max_seconds)
            if upstream.protocol == "grpc"
            else HttpUpstream(upstream)
        )
        self.options = options
        self.timeout = upstream.timeout_seconds
        self.backoff = Backoff(options.retry_base_seconds, options.retry_max_seconds)
        self.metrics = metrics
        self.attributes = {"upstream": self.name}
        self._done = done
        self._parcels: deque[Parcel] = deque()
        self._wake = threading.Condition()  # guards _parcels, _batch and _deadline
        self._batch: list[Parcel] | None = None  # being delivered, not yet settled
        self._deadline: float | None = None  # set by close(): drain until then
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tracefact-forward", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, parcel: Parcel) -> None:
        with self._wake:
            self._parcels.append(parcel)
            self._wake.notify()

    def close(self, deadline: float) -> None:
        with self._wake:
            self._deadline = deadline
            self._wake.notify()
        self._closing.set()

    def join(self, deadline: float) -> None:
        """Wait for the drain until `deadline`; then settle what is left as lost."""
        self._thread.join(max(0.0, deadline - time.monotonic()) + _SETTLE_SECONDS)
        with self._wake:
            left = [*(self._batch or ()), *self._parcels]
            self._batch = None  # the thread, if its call ever returns, counts nothing
            self._parcels.clear()
        if left:
            error = "the drain deadline passed during an upstream call"
            self._lost(sum(p.spans for p in left), semconv.UPSTREAM_SHUTDOWN, error)
            for parcel in left:
                _cut(parcel)
                self._done(parcel)
        if not self._thread.is_alive():  # else it is still using the client: exit frees it
            self.client.close()

    def _take(self) -> list[Parcel] | None:
        with self._wake:
            while not self._parcels:
                if self._deadline is not None:
                    return None
                self._wake.wait()
            batch: list[Parcel] = []
            spans = 0
            while self._parcels and (not batch or spans < self.options.batch_spans):
                parcel = self._parcels.popleft()
                batch.append(parcel)
                spans += parcel.spans
            self._batch = batch
            return batch

    def _run(self) -> None:
        while (batch := self._take()) is not None:
            if self._deliver(batch):
                for parcel in batch:
                    self._done(parcel)

    def _settle(self, batch: list[Parcel]) -> bool:
        """Claim `batch` to count its outcome; False once `join` counted it as lost."""
        with self._wake:
            if self._batch is not batch:
                return False
            self._batch = None
            return True

    def _deliver(self, batch: list[Parcel]) -> bool:
        """Send `batch`, retrying while it may, and count the outcome; False if `join` did."""
        body = b"".join(p.payload for p in batch)
        spans = sum(p.spans for p in batch)
        attempt, error = 0, "the drain deadline passed first"
        while True:
            remaining = self._remaining()
            if remaining is not None and remaining <= 0:
                return self._count(batch, spans, semconv.UPSTREAM_SHUTDOWN, error)
            timeout = self.timeout if remaining is None else min(self.timeout, remaining)
            outcome = self.client.export(body, timeout)
            if outcome.ok:
                rejected = min(outcome.rejected, spans)
                return self._count(
                    batch, rejected, semconv.UPSTREAM_REJECTED, outcome.error, spans - rejected
                )
            error = outcome.error
            if not outcome.transient:
                return self._count(batch, spans, semconv.UPSTREAM_REJECTED, error)
            self.metrics.retries.add(1, self.attributes)
            if attempt == 0:
                logger.warning(
                    "upstream failed; holding and retrying",
                    extra={"event": "upstream_retry", "upstream": self.name, "error": error},
                )
            delay = self.backoff.delay(attempt, outcome.retry_after)
            attempt += 1
            remaining = self._remaining()
            if remaining is None:
                self._closing.wait(delay)  # close() cuts a long wait short
            else:  # draining: leave room for one more try before the deadline
                time.sleep(max(0.0, min(delay, remaining / 2)))

    def _count(
        self, batch: list[Parcel], lost: int, reason: str, error: str, forwarded: int | None = None
    ) -> bool:
        """Count a batch's outcome, unless `join` already counted it as lost; False then."""
        if not self._settle(batch):
            return False
        if reason == semconv.UPSTREAM_SHUTDOWN:
            for parcel in batch:
                _cut(parcel)
        if forwarded is not None:
            self.metrics.forwarded.add(forwarded, self.attributes)
        if lost:
            self._lost(lost, reason, error)
        return True

    def _remaining(self) -> float | None:
        """Seconds to the drain deadline; None while not draining."""
        with self._wake:
            deadline = self._deadline
        return None if deadline is None else deadline - time.monotonic()

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


class Forwarder:
    """Hands each parcel to every upstream's sender; bounded in spans and bytes held."""

    def __init__(
        self, upstreams: Sequence[Upstream], options: Forwarding, metrics: CollectorMetrics
    ) -> None:
        self.options = options
        self.senders = [Sender(u, options, metrics, self._finished) for u in upstreams]
        self._lock = threading.Lock()  # guards the two totals
        self.spans = 0
        self.bytes = 0

    def start(self) -> None:
        for sender in self.senders:
            sender.start()

    def full(self) -> bool:
        """At a bound: the receivers refuse new requests until it drains."""
        return self.spans >= self.options.max_spans or self.bytes >= self.options.max_bytes

    def send(self, payload: bytes, spans: int, on_done: Callable[[bool], None] | None) -> None:
        """Queue encoded spans for every upstream. Never blocks, never refuses."""
        parcel = Parcel(payload, spans, on_done, left=len(self.senders))
        with self._lock:
            self.spans += spans
            self.bytes += len(payload)
        for sender in self.senders:
            sender.add(parcel)

    def _finished(self, parcel: Parcel) -> None:
        with parcel.lock:
            parcel.left -= 1
            last = parcel.left == 0
            settled = not parcel.cut
        if not last:
            return
        with self._lock:
            self.spans -= parcel.spans
            self.bytes -= len(parcel.payload)
        if parcel.on_done is not None:
            parcel.on_done(settled)

    def close(self, deadline: float) -> None:
        """Send what is held until `deadline` (monotonic); count what is left as lost."""
        for sender in self.senders:
            sender.close(deadline)
        for sender in self.senders:
            sender.join(deadline)

    @staticmethod
    def describe(upstreams: Sequence[Upstream]) -> list[dict[str, Any]]:
        return [{"endpoint": u.endpoint, "protocol": u.protocol} for u in upstreams]
