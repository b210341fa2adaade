"""Real OTLP trace receivers on 127.0.0.1 (HTTP and gRPC), for round-trip tests."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.fakes.json_api import QuietHandler, base_url, local_server


class OTLPReceiver:
    """Collects every ExportTraceServiceRequest it accepts.

    `fail_with` set to an HTTP status makes it refuse every request with it (a backend
    that is down or overloaded); `refused` counts those refusals. `refuse_if` refuses
    (400) the requests it is true of, as a backend refuses one it cannot read.
    """

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        self.received = threading.Condition()
        self.fail_with: int | None = None
        self.refuse_if: Callable[[ExportTraceServiceRequest], bool] | None = None
        self.refused = 0
        self.reply = ExportTraceServiceResponse()
        """What an accepted request gets back (set a partial success to test it)."""
        self.endpoint = ""

    def spans(self) -> list[tuple[dict[str, str], Span]]:
        """(resource attributes, span) for every received span."""
        out = []
        with self.received:
            requests = list(self.requests)
        for request in requests:
            for resource_spans in request.resource_spans:
                resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    out.extend((resource, span) for span in scope_spans.spans)
        return out

    def wait_for(self, count: int, timeout: float = 10.0) -> bool:
        with self.received:
            return self.received.wait_for(lambda: self._count() >= count, timeout)

    def _count(self) -> int:
        return sum(
            len(s.spans) for r in self.requests for rs in r.resource_spans for s in rs.scope_spans
        )

    def record(self, request: ExportTraceServiceRequest, headers: dict[str, str]) -> None:
        with self.received:
            self.requests.append(request)
            self.headers.append(headers)
            self.received.notify_all()


@contextmanager
def otlp_receiver(port: int = 0) -> Iterator[OTLPReceiver]:
    """An OTLP/HTTP receiver on /v1/traces (protobuf, gzip or not)."""
    receiver = OTLPReceiver()

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path.split("?")[0] != "/v1/traces":
                self._reply(404, b"")
                return
            if receiver.fail_with is not None:
                receiver.refused += 1
                self._reply(receiver.fail_with, b"scripted failure")
                return
            request = ExportTraceServiceRequest.FromString(body)
            if receiver.refuse_if is not None and receiver.refuse_if(request):
                receiver.refused += 1
                self._reply(400, b"scripted refusal")
                return
            receiver.record(request, dict(self.headers))
            self._reply(200, receiver.reply.SerializeToString())

        def _reply(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    with local_server(Handler, port) as server:
        receiver.endpoint = base_url(server)
        yield receiver


@contextmanager
def grpc_otlp_receiver(port: int = 0) -> Iterator[OTLPReceiver]:
    """An OTLP/gRPC receiver (TraceService/Export); `endpoint` is host:port."""
    import grpc

    receiver = OTLPReceiver()

    def export(request: ExportTraceServiceRequest, context: Any) -> ExportTraceServiceResponse:
        if receiver.fail_with is not None:
            receiver.refused += 1
            context.abort(grpc.StatusCode.UNAVAILABLE, "scripted failure")
        receiver.record(request, dict(context.invocation_metadata()))
        return receiver.reply

    handler = grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService",
        {
            "Export": grpc.unary_unary_rpc_method_handler(
                export,
                request_deserializer=ExportTraceServiceRequest.FromString,
                response_serializer=ExportTraceServiceResponse.SerializeToString,
            )
        },
    )
    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    receiver.endpoint = f"127.0.0.1:{bound}"
    try:
        yield receiver
    finally:
        server.stop(0).wait(5)
