"""A real OTLP/HTTP trace receiver on 127.0.0.1, for round-trip tests."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.fakes.json_api import QuietHandler, base_url, local_server


class OTLPReceiver:
    """Collects every ExportTraceServiceRequest posted to /v1/traces."""

    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.requests: list[ExportTraceServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        self.received = threading.Condition()

    @property
    def endpoint(self) -> str:
        return base_url(self.server)

    def spans(self) -> list[tuple[dict[str, str], object]]:
        """(resource attributes, span) for every received span."""
        out = []
        for request in self.requests:
            for resource_spans in request.resource_spans:
                resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    out.extend((resource, span) for span in scope_spans.spans)
        return out

    def wait_for(self, count: int, timeout: float = 10.0) -> None:
        with self.received:
            self.received.wait_for(lambda: len(self.spans()) >= count, timeout)


@contextmanager
def otlp_receiver() -> Iterator[OTLPReceiver]:
    receiver: OTLPReceiver

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            request = ExportTraceServiceRequest.FromString(body)
            with receiver.received:
                receiver.requests.append(request)
                receiver.headers.append(dict(self.headers))
                receiver.received.notify_all()
            payload = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    with local_server(Handler) as server:
        receiver = OTLPReceiver(server)
        yield receiver
