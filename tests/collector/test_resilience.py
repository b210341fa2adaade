"""Upstream outages, a full buffer and SIGTERM: spans are held, refused or drained, never lost.

Each test runs its own collector: these are about the process's state.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import grpc
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.collector.harness import (
    attributes,
    base_config,
    fixture_spans,
    running_collector,
    start,
    wait_until,
    write_config,
)
from tests.fakes.otlp import grpc_otlp_receiver, otlp_receiver
from tracefact import semconv

PROTOBUF = {"Content-Type": "application/x-protobuf"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def request_bytes(name: str, trace_id: int) -> bytes:
    return encode_spans(fixture_spans(name, trace_id)).SerializeToString()


def send(collector: str, name: str, trace_id: int) -> httpx.Response:
    """POST a fixture's spans to a collector's OTLP/HTTP receiver."""
    return httpx.post(
        f"{collector}/v1/traces", content=request_bytes(name, trace_id), headers=PROTOBUF
    )


def metric(text: str, name: str, **labels: str) -> float:
    """The sum of a Prometheus metric's samples whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in series for k, v in labels.items()):
            total += float(value)
    return total


def forwarded_and_empty(metrics_url: str, spans: int) -> bool:
    """The collector counts `spans` forwarded and holds none for forwarding."""
    text = httpx.get(metrics_url).text
    return (
        metric(text, "tracefact_collector_spans_forwarded_total") == spans
        and metric(text, "tracefact_collector_forward_buffered") == 0
    )


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_upstream_down_then_back_gets_every_held_span_once(tmp_path: Path, protocol: str) -> None:
    port = free_port()
    config = base_config(f"http://127.0.0.1:{port}")
    if protocol == "grpc":
        config["upstreams"] = [{"endpoint": f"127.0.0.1:{port}", "protocol": "grpc"}]
    with running_collector(tmp_path / "c.yaml", config) as collector:
        names = ["langchain-retriever-plain", "openinference-invented-plain"] * 5
        for index, name in enumerate(names):
            response = send(collector.http, name, 0x1000 + index)
            assert response.status_code == 200
        expected = sum(len(fixture_spans(n)) for n in names)
        metrics_url = f"{collector.http}/metrics"
        assert wait_until(
            lambda: metric(httpx.get(metrics_url).text, "tracefact_collector_upstream_retries") >= 3
        )
        receiver = otlp_receiver if protocol == "http" else grpc_otlp_receiver
        with receiver(port) as upstream:
            assert upstream.wait_for(expected, 20)
            # Nothing is left to send (so nothing can arrive twice later) once every span
            # is counted forwarded and the buffer is empty: the upstream answered for each.
            assert wait_until(lambda: forwarded_and_empty(metrics_url, expected))
            spans = upstream.spans()
            ids = [(s.trace_id, s.span_id) for _, s in spans]
            assert len(ids) == expected and len(set(ids)) == expected
            llm = [s for _, s in spans if s.name in ("ChatOpenAI", "ChatCompletion")]
            assert {attributes(s)[semconv.EVAL_STATUS] for s in llm} <= {"ok", "skipped"}
            text = httpx.get(metrics_url).text
            assert metric(text, "tracefact_collector_spans_forwarded_total") == expected
            assert metric(text, "tracefact_collector_upstream_failed") == 0
            assert wait_until(
                lambda: metric(httpx.get(metrics_url).text, "tracefact_collector_queue_depth") == 0
            )
        assert collector.events("upstream_retry")


def test_a_full_buffer_answers_429_and_resource_exhausted_with_a_retry_hint(
    tmp_path: Path,
) -> None:
    port = free_port()
    config = base_config(f"http://127.0.0.1:{port}")
    config["queue_max_requests"] = 4
    config["forwarding"].update({"max_spans": 6, "retry_after_seconds": 2})
    with running_collector(tmp_path / "c.yaml", config) as collector:
        accepted = 0
        statuses = []
        for index in range(12):
            response = send(collector.http, "langchain-retriever-plain", 0x2000 + index)
            statuses.append(response.status_code)
            if response.status_code == 200:
                accepted += 1
            else:
                assert response.status_code == 429
                assert response.headers["Retry-After"] == "2"
        assert 429 in statuses and accepted >= 2, statuses
        assert httpx.get(f"{collector.http}/readyz").status_code == 503
        with grpc.insecure_channel(collector.grpc) as channel:
            export = channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                request_serializer=ExportTraceServiceRequest.SerializeToString,
                response_deserializer=lambda b: b,
            )
            request = ExportTraceServiceRequest.FromString(
                request_bytes("langchain-retriever-plain", 0x2100)
            )
            call = None
            try:
                export.with_call(request, timeout=5)
            except grpc.RpcError as exc:
                call = exc
            assert call is not None and call.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            trailers = dict(call.trailing_metadata() or ())
            assert "google.rpc.retryinfo-bin" in trailers
        with otlp_receiver(port) as upstream:
            assert upstream.wait_for(accepted * 3, 20)
            assert wait_until(
                lambda: forwarded_and_empty(f"{collector.http}/metrics", accepted * 3)
            )
            ids = [(s.trace_id, s.span_id) for _, s in upstream.spans()]
            assert len(ids) == accepted * 3 == len(set(ids))
            assert wait_until(lambda: httpx.get(f"{collector.http}/readyz").status_code == 200)


def test_a_permanent_upstream_refusal_is_counted_not_retried(tmp_path: Path) -> None:
    with otlp_receiver() as upstream:
        upstream.fail_with = 400
        config = base_config(upstream.endpoint)
        with running_collector(tmp_path / "c.yaml", config) as collector:
            response = send(collector.http, "langchain-retriever-plain", 0x3000)
            assert response.status_code == 200
            url = f"{collector.http}/metrics"
            assert wait_until(
                lambda: (
                    metric(
                        httpx.get(url).text,
                        "tracefact_collector_upstream_failed",
                        reason="rejected",
                    )
                    == 3
                )
            )
            text = httpx.get(url).text
            assert metric(text, "tracefact_collector_upstream_retries") == 0
            assert metric(text, "tracefact_collector_queue_depth") == 0
            assert upstream.refused in (1, 2)  # one batch, or the LLM span after the rest
            failed = collector.events("upstream_failed")
            assert len(failed) == upstream.refused
            assert sum(f["spans"] for f in failed) == 3
            assert all("HTTP 400" in f["error"] for f in failed)


def test_sigterm_drains_held_spans_and_evaluations_then_exits_0(tmp_path: Path) -> None:
    with otlp_receiver() as upstream:
        # A long window: only the drain can release these LLM spans in time.
        config = base_config(upstream.endpoint, window_seconds=60)
        collector = start(write_config(tmp_path / "c.yaml", config))
        collector.wait_listening()
        names = ["openllmetry_chromadb-retriever-plain", "openinference-invented-plain"] * 3
        for index, name in enumerate(names):
            response = send(collector.http, name, 0x4000 + index)
            assert response.status_code == 200
        # The window is 60 s and the exit's bound 30 s: only the drain released these.
        assert collector.terminate(timeout=30) == 0
        expected = sum(len(fixture_spans(n)) for n in names)
        spans = upstream.spans()
        assert len(spans) == expected
        statuses = [
            attributes(s).get(semconv.EVAL_STATUS)
            for _, s in spans
            if s.name in ("openai.chat", "ChatCompletion")
        ]
        assert len(statuses) == 6 and None not in statuses
        events = [collector.events(e) for e in ("draining", "stopped")]
        assert all(events), collector.lines[-5:]


def test_sigterm_with_the_upstream_down_counts_what_it_could_not_send(tmp_path: Path) -> None:
    config = base_config(f"http://127.0.0.1:{free_port()}", drain_seconds=0.5)
    config["drain_seconds"] = 2
    config["forwarding"] = {"retry_base_seconds": 600, "retry_max_seconds": 600}
    collector = start(write_config(tmp_path / "c.yaml", config))
    collector.wait_listening()
    response = send(collector.http, "langchain-retriever-plain", 0x5000)
    assert response.status_code == 200
    # Retries 10 minutes apart, an exit bound of 30 s: the drain deadline ended them.
    assert collector.terminate(timeout=30) == 0
    failed = collector.events("upstream_failed")
    assert sum(f["spans"] for f in failed) == 3
    assert {f["reason"] for f in failed} == {"shutdown"}


class SilentUpstream:
    """Accepts connections and reads what comes; answers 503 until `hang`, then nothing."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.hang = threading.Event()
        self.received = 0  # reads that got bytes: something was sent
        self._connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return  # closed
            self._connections.append(connection)
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        try:
            while data := connection.recv(65536):
                self.received += 1
                if not self.hang.is_set() and b"\r\n\r\n" in data:
                    connection.sendall(
                        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
                    )
        except OSError:
            return

    def close(self) -> None:
        self.server.close()
        for connection in self._connections:
            connection.close()


@pytest.mark.parametrize(
    ("protocol", "when"),
    [("http", "before"), ("http", "during"), ("grpc", "before")],
    ids=["http-call-under-way", "http-call-in-the-drain", "grpc-call-under-way"],
)
def test_an_upstream_that_never_answers_cannot_hold_the_exit_past_the_deadline(
    tmp_path: Path, protocol: str, when: str
) -> None:
    upstream = SilentUpstream()
    try:
        endpoint = f"http://{upstream.endpoint}" if protocol == "http" else upstream.endpoint
        config = base_config(endpoint, drain_seconds=0.5)
        config["upstreams"] = [{"endpoint": endpoint, "protocol": protocol, "timeout_seconds": 600}]
        config["drain_seconds"] = 2
        if when == "before":  # the call is under way (for up to 600 s) when SIGTERM comes
            upstream.hang.set()
        else:  # 503s, then a long backoff that SIGTERM cuts short: the retry is in the drain
            config["forwarding"] = {"retry_base_seconds": 600, "retry_max_seconds": 600}
        collector = start(write_config(tmp_path / "c.yaml", config))
        collector.wait_listening()
        response = send(collector.http, "langchain-retriever-plain", 0x5100)
        assert response.status_code == 200
        assert wait_until(lambda: upstream.received >= 1)  # the call is under way
        if when == "during":  # the 503 came back: the sender is in its backoff
            metrics_url = f"{collector.http}/metrics"
            assert wait_until(
                lambda: metric(httpx.get(metrics_url).text, "tracefact_collector_upstream_retries")
            )
        upstream.hang.set()
        # The call would take 600 s, the backoff as long; the exit's bound is 30 s.
        assert collector.terminate(timeout=30) == 0
    finally:
        upstream.close()
    failed = collector.events("upstream_failed")
    assert sum(f["spans"] for f in failed) == 3, failed
    assert {f["reason"] for f in failed} == {"shutdown"}


def test_a_full_evaluation_queue_samples_out_evaluations_not_requests(tmp_path: Path) -> None:
    """queue_size 1 and an evaluator that takes a second: the rest go on as `sampled_out`."""
    with otlp_receiver() as upstream:
        config = base_config(
            upstream.endpoint,
            evaluators=[{"import": "tests.collector.evaluators:slow", "kwargs": {"seconds": 1}}],
            queue_size=1,
            window_seconds=0,
        )
        with running_collector(tmp_path / "c.yaml", config) as collector:
            for index in range(6):
                response = send(collector.http, "langchain-retriever-plain", 0x6000 + index)
                assert response.status_code == 200
            assert upstream.wait_for(18, 20)
        statuses = sorted(
            attributes(s)[semconv.EVAL_STATUS]
            for _, s in upstream.spans()
            if s.name == "ChatOpenAI"
        )
        assert len(statuses) == 6
        assert "ok" in statuses and statuses.count("sampled_out") >= 3, statuses
        assert set(statuses) <= {"ok", "sampled_out"}


def test_attach_span_forwards_at_once_and_sends_a_linked_carrier(tmp_path: Path) -> None:
    with otlp_receiver() as upstream:
        config = base_config(upstream.endpoint, attach="span", window_seconds=0)
        with running_collector(tmp_path / "c.yaml", config) as collector:
            response = send(collector.http, "langchain-retriever-plain", 0x7000)
            assert response.status_code == 200
            assert upstream.wait_for(4)
    sent = {
        s.span_id: s
        for s in encode_spans(fixture_spans("langchain-retriever-plain", 0x7000))
        .resource_spans[0]
        .scope_spans[0]
        .spans
    }
    received = [s for _, s in upstream.spans()]
    carriers = [s for s in received if s.span_id not in sent]
    assert len(received) == 4 and len(carriers) == 1
    for span in received:
        if span.span_id in sent:
            assert span.SerializeToString() == sent[span.span_id].SerializeToString()
    [carrier] = carriers
    values = attributes(carrier)
    [llm] = [s for s in sent.values() if s.name == "ChatOpenAI"]
    assert values["openinference.span.kind"] == "EVALUATOR"
    assert values[semconv.EVAL_STATUS] == "ok"
    assert values[semconv.EVAL_SAMPLE_RATE] == 1.0
    assert carrier.trace_id == llm.trace_id
    assert carrier.parent_span_id == llm.span_id
    assert [link.span_id for link in carrier.links] == [llm.span_id]
    assert [e.name for e in carrier.events] == [semconv.GEN_AI_EVALUATION_EVENT]
    assert carrier.start_time_unix_nano <= carrier.end_time_unix_nano
    [(resource, scope)] = [
        (r.resource, s.scope)
        for request in upstream.requests
        for r in request.resource_spans
        for s in r.scope_spans
        if carrier in s.spans
    ]
    sent_resource = encode_spans(fixture_spans("langchain-retriever-plain", 0x7000))
    assert resource == sent_resource.resource_spans[0].resource  # the evaluated span's
    assert scope.name == "tracefact.evaluation"


def test_the_window_is_bounded_the_oldest_spans_leave_early(tmp_path: Path) -> None:
    with otlp_receiver() as upstream:
        config = base_config(upstream.endpoint, window_seconds=60, window_max_spans=2)
        with running_collector(tmp_path / "c.yaml", config) as collector:
            for index in range(5):
                response = send(collector.http, "openinference-invented-plain", 0x8000 + index)
                assert response.status_code == 200
            assert upstream.wait_for(3, 10)  # three left early; two wait out the window
            url = f"{collector.http}/metrics"
            assert wait_until(lambda: forwarded_and_empty(url, 3))
            early = {int.from_bytes(s.trace_id, "big") for _, s in upstream.spans()}
            assert early == {0x8000, 0x8001, 0x8002}
            waiting = metric(
                httpx.get(f"{collector.http}/metrics").text, "tracefact_collector_window_waiting"
            )
            assert waiting == 2
        assert len(upstream.spans()) == 5  # the drain released the rest


def test_a_partial_success_counts_the_spans_the_upstream_dropped(tmp_path: Path) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTracePartialSuccess,
        ExportTraceServiceResponse,
    )

    with otlp_receiver() as upstream:
        upstream.reply = ExportTraceServiceResponse(
            partial_success=ExportTracePartialSuccess(rejected_spans=1, error_message="too old")
        )
        config = base_config(upstream.endpoint, enabled=False)
        with running_collector(tmp_path / "c.yaml", config) as collector:
            response = send(collector.http, "langchain-retriever-plain", 0x9000)
            assert response.status_code == 200
            url = f"{collector.http}/metrics"
            assert wait_until(
                lambda: metric(httpx.get(url).text, "tracefact_collector_upstream_failed") == 1
            )
            text = httpx.get(url).text
            assert metric(text, "tracefact_collector_spans_forwarded_total") == 2
            [failed] = collector.events("upstream_failed")
            assert failed["reason"] == "rejected" and "too old" in failed["error"]


def test_a_request_the_upstream_refuses_costs_no_other_clients_spans(tmp_path: Path) -> None:
    """Requests of several clients travel in one upstream batch: a refusal is isolated."""
    poison = 0x9000

    def refuse(request: ExportTraceServiceRequest) -> bool:
        trace_ids = {
            int.from_bytes(s.trace_id, "big")
            for r in request.resource_spans
            for ss in r.scope_spans
            for s in ss.spans
        }
        return poison in trace_ids

    with otlp_receiver() as upstream:
        upstream.refuse_if = refuse
        config = base_config(upstream.endpoint)
        config["evaluation"]["enabled"] = False
        config["forwarding"]["delay_seconds"] = 1.0  # both requests wait in one batch
        with running_collector(tmp_path / "c.yaml", config) as collector:
            assert send(collector.http, "langchain-retriever-plain", 0x9001).status_code == 200
            assert send(collector.http, "langchain-retriever-plain", poison).status_code == 200
            assert wait_until(lambda: len(upstream.spans()) == 3)
            text = httpx.get(f"{collector.http}/metrics").text
            refused = metric(text, "tracefact_collector_upstream_failed", reason="rejected")
            assert refused == 3  # the refused request's spans, counted
        assert upstream.refused >= 2  # the batch, then the refused request alone
    trace_ids = {int.from_bytes(s.trace_id, "big") for _, s in upstream.spans()}
    assert trace_ids == {0x9001}
