"""A bug in the router costs evaluation, never spans: the request goes on as received."""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.metrics import MeterProvider

from tests.collector.harness import fixture_spans, wait_until
from tests.fakes.otlp import otlp_receiver
from tracefact.collector.config import Forwarding, Upstream
from tracefact.collector.engine import Engine
from tracefact.collector.forwarder import Forwarder
from tracefact.collector.memory import MemoryQueue
from tracefact.collector.metrics import CollectorMetrics
from tracefact.collector.writeback import WriteBack


class FailsOnce(Forwarder):
    """The first hand-over raises, as a bug in the routing path would."""

    failed = False

    def send(self, payload: bytes, spans: int, on_done: Callable[[bool], None] | None) -> None:
        if not self.failed:
            self.failed = True
            raise RuntimeError("injected routing fault")
        super().send(payload, spans, on_done)


def test_a_request_the_router_fails_on_is_forwarded_as_received_and_acknowledged() -> None:
    with otlp_receiver() as upstream:
        metrics = CollectorMetrics(MeterProvider())
        forwarder = FailsOnce([Upstream(endpoint=upstream.endpoint)], Forwarding(), metrics)
        queue = MemoryQueue(4)
        engine = Engine(queue, forwarder, None, WriteBack(forwarder), 0.0, 10, metrics)
        forwarder.start()
        engine.start()
        request = encode_spans(fixture_spans("langchain-retriever-plain", 0xFA17))
        queue.put(request)
        assert upstream.wait_for(3)
        assert wait_until(lambda: queue.depth() == 0)
        engine.stop(5)
        forwarder.close(0)
        [received] = upstream.requests
        assert received.SerializeToString() == request.SerializeToString()
