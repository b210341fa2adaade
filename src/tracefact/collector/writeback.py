"""Held LLM spans and their way out: verdicts written onto the protobuf span, then forwarded.

The pipeline's verdicts come back here (`WriteBack.apply`, the collector's half of the
pipeline): one for a held span is written onto the span as received (attributes and
events appended) and the span is forwarded under its original resource and scope; one
for a span that has left goes on a protobuf carrier span. No SDK span is built.

A received request is acknowledged to its queue once every span of it has left
upstream, or was counted as failed there, and every result of it handed to a result sink
was delivered, failed or dropped there (`Tracker`); carriers are not counted in it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from tracefact import semconv
from tracefact.collector import spans
from tracefact.collector.forwarder import Forwarder
from tracefact.pipeline.verdict import Verdict

logger = logging.getLogger("tracefact.collector")


class Tracker:
    """An entry's spans still to leave upstream; the entry is acknowledged at zero.

    With a durable queue (`keep` given), a span that could not leave by the drain
    deadline (evaluation or forwarding cut off) keeps the entry: it is never acknowledged
    here, so the queue hands it to another consumer, which evaluates and forwards it.
    """

    __slots__ = ("_ack", "_keep", "_kept", "_left", "_lock", "entry_id")

    def __init__(
        self,
        entry_id: str,
        ack: Callable[[str], None],
        keep: Callable[[str], None] | None = None,
    ) -> None:
        self.entry_id = entry_id
        self._ack = ack
        self._keep = keep
        self._kept = False
        self._left = 1  # held by the router until it has counted every span
        self._lock = threading.Lock()

    @property
    def keeps(self) -> bool:
        """True when a span cut off at shutdown leaves the entry to another consumer."""
        return self._keep is not None

    def add(self, spans: int) -> None:
        with self._lock:
            self._left += spans

    def hold(self, results: int) -> bool:
        """Wait for `results` sink deliveries too, unless the entry is already acknowledged."""
        with self._lock:
            if self._left <= 0:
                return False
            self._left += results
            return True

    def done(self, spans: int = 1, cut: bool = False) -> None:
        """`spans` left upstream, or were `cut` off by the drain deadline."""
        with self._lock:
            self._left -= spans
            newly_kept = cut and self._keep is not None and not self._kept
            self._kept = self._kept or newly_kept
            finished = self._left == 0 and not self._kept
        if newly_kept and self._keep is not None:
            self._keep(self.entry_id)
        if finished:
            try:  # runs on a forwarding thread, which must outlive any queue fault
                self._ack(self.entry_id)
            except Exception:  # the entry comes again later: a counted duplicate
                logger.exception("acknowledgement failed", extra={"event": "ack_failed"})


def done_callback(tracker: Tracker, spans: int) -> Callable[[bool], None]:
    """The forwarder's callback for `spans` of a tracked entry."""
    return lambda cut: tracker.done(spans, cut)


@dataclass(slots=True)
class Held:
    """An LLM span between its arrival and its forwarding."""

    span: Span
    resource_spans: ResourceSpans
    scope_spans: ScopeSpans
    resource: Mapping[str, Any]
    """The resource's attributes, decoded once for every span of it."""
    tracker: Tracker
    trace_id: int
    due: float
    left: bool = field(default=False)
    """Forwarded (or left to another consumer): it leaves once."""


class WriteBack:
    """Applies verdicts to held spans and forwards them; carriers go out as new spans."""

    def __init__(self, forwarder: Forwarder) -> None:
        self.forwarder = forwarder
        self._lock = threading.Lock()  # `left`: the evaluation loop and the engine race

    def apply(self, held: Held, verdict: Verdict) -> None:
        """The pipeline's `apply`: on the span if it is still here, else on a carrier."""
        if verdict.carrier:
            carrier = spans.carrier(held.span, verdict, time.time_ns())
            self.forwarder.send(spans.single_request(held.resource_spans, carrier), 1, None)
            return
        if verdict.status == semconv.STATUS_SHUTDOWN and held.tracker.keeps:
            if self._leave(held):  # evaluated by the entry's next consumer
                held.tracker.done(1, cut=True)
            return
        try:
            spans.write(held.span, verdict)
        except Exception:  # an unencodable result must not cost the span itself
            logger.exception("verdict not written on the span", extra={"event": "enrich_failed"})
        self.forward(held)

    def receipt(self, held: Held, results: int) -> Callable[[bool], None] | None:
        """The pipeline's `receipt`: the entry is acknowledged once the sinks settle too.

        A result the sinks had not settled when the process died leaves its entry in a
        durable queue, so the next consumer evaluates and sends it again.
        """
        if not held.tracker.hold(results):
            return None
        return lambda cut: held.tracker.done(1, cut)

    def forward(self, held: Held) -> None:
        """Send the held span upstream as it is now, once."""
        if not self._leave(held):
            return
        payload = spans.single_request(held.resource_spans, held.span, held.scope_spans)
        self.forwarder.send(payload, 1, done_callback(held.tracker, 1))

    def _leave(self, held: Held) -> bool:
        with self._lock:
            first, held.left = not held.left, True
            return first
