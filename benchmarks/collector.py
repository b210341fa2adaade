"""The tracefact collector's throughput, evaluation rate and memory, over real sockets.

Three processes besides this one: the collector (`tracefact collector --config ...`, the
command line users run), a sender posting pre-encoded OTLP/HTTP protobuf batches of 512
spans on keep-alive connections, and a counting upstream receiver. Everything runs on
127.0.0.1 and shares the machine's cores, sender included.

1. Forwarding, no evaluation: spans/s accepted (answered 200) and forwarded (arrived
   upstream), with the 429s the collector answered.
2. LLM traffic (HTTP, chain, retriever and OpenInference LLM spans, one trace each),
   every LLM span sampled to the default evaluator (LocalFactuality): spans/s, then
   evaluations/s and each `tracefact.eval.status` counted upstream (`dropped`: the
   evaluation queue was full, the span went on unevaluated).
3. Memory per held trace: traces whose LLM span waits for the window (set long) with its
   retriever documents stored; the collector's RSS before and after, divided.
4. CPU per evaluated LLM span: the same LLM traffic, a fixed number of batches posted one
   after another, through a collector whose evaluator answers at once (`Instant`, below),
   then through one with evaluation off. The collector's CPU time (user + system, from
   /proc, so other load on the machine barely moves it) over each run, divided by the LLM
   spans; the difference is what evaluating one LLM span costs the collector: routing it,
   the window, the pipeline, the verdict written back onto the span and its forwarding.
   Repeated `--repeats` times (min and median), since a shared machine is noisy.

5. The issue's collector rows, in this process (`rows`): pass-through CPU per span with
   evaluation off against decode + re-encode alone, a plain asyncio forwarder of the
   same bytes, and the HTTP stack the collector had before (http.server in, httpx out,
   nothing else: issue 30's first profile), and the engine's and the evaluation loop's
   thread CPU per LLM span to an instant evaluator; printed as markdown rows
   `| path | measured | goal |`.

Numbers are printed, nothing is asserted about speed.

    python benchmarks/collector.py [--seconds 10] [--senders 2] [--held 4000]
                                   [--only forwarding|cpu|rows] [--repeats 5] [--batches 40]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span

BATCH_SPANS = 512
STATUS_KEY = "tracefact.eval.status"
PROTOBUF = "application/x-protobuf"


# --- traffic -------------------------------------------------------------------------


def _kv(key: str, value: str | int) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _span(
    rng: random.Random, trace_id: bytes, parent: bytes, name: str, attributes: dict[str, Any]
) -> Span:
    start = time.time_ns() - rng.randrange(10**9)
    return Span(
        trace_id=trace_id,
        span_id=rng.randbytes(8),
        parent_span_id=parent,
        name=name,
        kind=Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=start,
        end_time_unix_nano=start + rng.randrange(10**6, 10**8),
        attributes=[_kv(k, v) for k, v in attributes.items()],
    )


def plain_trace(rng: random.Random) -> list[Span]:
    """Four spans of a web request, as an instrumented service sends them."""
    trace_id = rng.randbytes(16)
    root = _span(
        rng,
        trace_id,
        b"",
        "GET /orders/{id}",
        {
            "http.request.method": "GET",
            "url.path": f"/orders/{rng.randrange(10**6)}",
            "http.route": "/orders/{id}",
            "http.response.status_code": 200,
            "server.address": "shop.internal",
            "user_agent.original": "Mozilla/5.0 (X11; Linux x86_64)",
        },
    )
    spans = [root]
    for name, system in (("SELECT orders", "postgresql"), ("GET", "redis"), ("render", "")):
        attributes: dict[str, Any] = {"code.function": name.lower()}
        if system:
            attributes |= {"db.system": system, "db.statement": f"{name} WHERE id = $1"}
        spans.append(_span(rng, trace_id, root.span_id, name, attributes))
    return spans


def llm_trace(rng: random.Random) -> list[Span]:
    """A RAG request: HTTP root, chain, retriever with three documents, an LLM span."""
    trace_id = rng.randbytes(16)
    n = rng.randrange(10**6)
    question = f"How tall is tower number {n}?"
    documents = [
        f"Tower number {n} is {100 + n % 300} metres tall and was completed in {1850 + n % 170}.",
        f"Tower number {n + 1} stands in a park and is painted {('red', 'grey')[n % 2]}.",
        "Towers are inspected every year; the inspection report lists their height.",
    ]
    answer = f"Tower number {n} is {100 + n % 300} metres tall."
    root = _span(rng, trace_id, b"", "POST /ask", {"http.request.method": "POST"})
    chain = _span(
        rng,
        trace_id,
        root.span_id,
        "rag",
        {"openinference.span.kind": "CHAIN", "input.value": question, "output.value": answer},
    )
    retriever_attributes: dict[str, Any] = {
        "openinference.span.kind": "RETRIEVER",
        "input.value": question,
    }
    for i, text in enumerate(documents):
        retriever_attributes[f"retrieval.documents.{i}.document.content"] = text
    retriever = _span(rng, trace_id, chain.span_id, "search", retriever_attributes)
    llm = _span(
        rng,
        trace_id,
        chain.span_id,
        "ChatCompletion",
        {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o-mini",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "Answer from the documents.",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": question,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": answer,
            "llm.token_count.prompt": 120,
            "llm.token_count.completion": 14,
        },
    )
    # As a RAG request runs: the retriever ends before the LLM span starts, inside the
    # chain, inside the root (an LLM span is judged against documents retrieved before it
    # ended). Ended first, sent first: the retriever's documents are there when it is.
    start = root.start_time_unix_nano
    for span, begins, ends in ((chain, 1, 90), (retriever, 2, 30), (llm, 31, 89)):
        span.start_time_unix_nano = start + begins * 10**6
        span.end_time_unix_nano = start + ends * 10**6
    root.end_time_unix_nano = start + 91 * 10**6
    return [retriever, llm, chain, root]


def batches(kind: str, count: int, seed: int) -> list[bytes]:
    """`count` encoded ExportTraceServiceRequests of BATCH_SPANS spans each, all distinct."""
    rng = random.Random(seed)
    make = plain_trace if kind == "plain" else llm_trace
    out = []
    for _ in range(count):
        spans: list[Span] = []
        while len(spans) < BATCH_SPANS:
            spans.extend(make(rng))
        resource_spans = ResourceSpans()
        resource_spans.resource.attributes.append(_kv("service.name", f"bench-{kind}"))
        scope = resource_spans.scope_spans.add()
        scope.scope.name = "benchmarks.collector"
        scope.spans.extend(spans[:BATCH_SPANS])
        out.append(ExportTraceServiceRequest(resource_spans=[resource_spans]).SerializeToString())
    return out


class Instant:
    """An evaluator that answers at once: what is left is the collector's own work."""

    name = "hallucination"

    def describe(self) -> Any:
        from tracefact.evaluators.base import EvaluatorDescription

        return EvaluatorDescription(name=self.name, evaluator="instant")

    async def evaluate(self, case: Any) -> Any:
        from tracefact.evaluators.base import EvalResult

        return EvalResult(
            name=self.name,
            label="factual",
            score=0.1,
            explanation="instant",
            evaluator="benchmarks/instant",
        )


def instant() -> Instant:
    return Instant()


# --- the counting upstream (its own process) ---------------------------------------------


class Counts:
    """What the upstream received: spans, statuses, first and last arrival."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans = 0
        self.requests = 0
        self.statuses: Counter[str] = Counter()
        self.first = 0.0
        self.last = 0.0
        self.last_by_status: dict[str, float] = {}

    def add(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        spans = 0
        statuses: Counter[str] = Counter()
        look = STATUS_KEY.encode() in body  # only evaluated traffic pays for the walk
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                spans += len(scope_spans.spans)
                if look:
                    for span in scope_spans.spans:
                        for kv in span.attributes:
                            if kv.key == STATUS_KEY:
                                statuses[kv.value.string_value] += 1
        now = time.monotonic()
        with self.lock:
            self.spans += spans
            self.requests += 1
            self.statuses.update(statuses)
            self.first = self.first or now
            self.last = now
            self.last_by_status.update(dict.fromkeys(statuses, now))

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "spans": self.spans,
                "requests": self.requests,
                "statuses": dict(self.statuses),
                "first": self.first,
                "last": self.last,
                "last_by_status": dict(self.last_by_status),
            }

    def reset(self) -> None:
        with self.lock:
            self.__init__()  # type: ignore[misc]


def serve_upstream() -> None:
    """Count OTLP/HTTP protobuf spans on /v1/traces; GET /stats and POST /reset; forever."""
    counts = Counts()
    ok = ExportTraceServiceResponse().SerializeToString()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._reply(200, json.dumps(counts.snapshot()).encode(), "application/json")

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path == "/reset":
                counts.reset()
                self._reply(200, b"{}", "application/json")
                return
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            counts.add(body)
            self._reply(200, ok, PROTOBUF)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: object, client_address: object) -> None:
            pass  # a collector stopped mid-request: nothing to report

    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


# --- the sender (its own process) --------------------------------------------------------


def restamp(body: bytes, round_: int) -> bytes:
    """The same batch in other traces: each trace id changed alike, so traces stay whole."""
    request = ExportTraceServiceRequest.FromString(body)
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                tail = int.from_bytes(span.trace_id[12:], "big") ^ round_
                span.trace_id = span.trace_id[:12] + tail.to_bytes(4, "big")
    encoded: bytes = request.SerializeToString()
    return encoded


def send(url: str, kind: str, seconds: float, senders: int, seed: int) -> dict[str, Any]:
    """Post pre-encoded batches from `senders` threads (connections) for `seconds`.

    LLM batches are never repeated as they are: past the first round their trace ids are
    restamped (about 1.3 ms of the sender's time per batch), since the collector keeps
    state per trace. Plain batches repeat; with evaluation off no state is kept.
    """
    templates = batches(kind, 64 if kind == "llm" else 256, seed)
    parts = urlsplit(url)
    accepted, refused, failed = [0] * senders, [0] * senders, [0] * senders

    def body(i: int) -> bytes:
        round_, index = divmod(i, len(templates))
        if kind != "llm" or round_ == 0:
            return templates[index]
        return restamp(templates[index], round_)

    def run(index: int) -> None:
        connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
        headers = {"Content-Type": PROTOBUF}
        i = index
        while time.monotonic() < deadline:
            payload = body(i)
            i += senders
            try:
                connection.request("POST", parts.path, payload, headers)
                response = connection.getresponse()
                response.read()
            except (OSError, http.client.HTTPException):
                failed[index] += 1
                connection.close()
                connection = http.client.HTTPConnection(parts.hostname or "", parts.port)
                continue
            if response.status == 200:
                accepted[index] += BATCH_SPANS
            elif response.status == 429:
                refused[index] += BATCH_SPANS
                time.sleep(min(float(response.getheader("Retry-After") or 0.1), 0.1))
            else:
                failed[index] += 1
        connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(senders)]
    started = time.monotonic()  # CLOCK_MONOTONIC: comparable across processes on Linux
    deadline = started + seconds
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {
        "accepted": sum(accepted),
        "refused": sum(refused),
        "failed_requests": sum(failed),
        "started": started,
        "seconds": time.monotonic() - started,
    }


# --- the run ------------------------------------------------------------------------------


@dataclass
class Processes:
    collector: subprocess.Popen[bytes]
    ingest: str
    upstream: str


def _get(url: str) -> tuple[int, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.request("GET", parts.path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _post(url: str) -> None:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.request("POST", parts.path, b"")
        connection.getresponse().read()
    finally:
        connection.close()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tracefact() -> list[str]:
    """The `tracefact` console script of this interpreter's environment."""
    return [str(Path(sys.executable).with_name("tracefact"))]


@contextmanager
def running_collector(config: dict[str, Any], workdir: Path) -> Iterator[Processes]:
    """The counting upstream and a collector forwarding to it, both stopped afterwards."""
    upstream = subprocess.Popen(
        [sys.executable, __file__, "--upstream"], stdout=subprocess.PIPE, text=True
    )
    assert upstream.stdout is not None
    upstream_url = f"http://127.0.0.1:{upstream.stdout.readline().strip()}"
    port = _free_port()
    config = {
        "receivers": {"http": {"host": "127.0.0.1", "port": port}, "grpc": None},
        "upstreams": [{"endpoint": f"{upstream_url}/v1/traces"}],
        "logging": {"level": "warning"},
        **config,
    }
    path = workdir / "tracefact.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    log = (workdir / "collector.log").open("wb")
    # The repository on the path: `import: benchmarks.collector:instant` evaluators.
    root = str(Path(__file__).resolve().parent.parent)
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH")))),
    }
    collector = subprocess.Popen(
        [*_tracefact(), "collector", "--config", str(path)], stdout=log, stderr=log, env=environment
    )
    ingest = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if _get(f"{ingest}/readyz")[0] == 200:
                    break
            except OSError:
                pass
            if collector.poll() is not None or time.monotonic() > deadline:
                log.flush()
                tail = (workdir / "collector.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"the collector did not become ready:\n{tail}")
            time.sleep(0.2)
        yield Processes(collector, ingest, upstream_url)
    finally:
        collector.terminate()
        try:
            collector.wait(timeout=30)
        except subprocess.TimeoutExpired:
            collector.kill()
            collector.wait()
        upstream.terminate()
        upstream.wait()
        log.close()


def run_sender(ingest: str, kind: str, seconds: float, senders: int) -> dict[str, Any]:
    command = [
        sys.executable,
        __file__,
        "--send",
        f"{ingest}/v1/traces",
        kind,
        str(seconds),
        str(senders),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def upstream_stats(upstream: str) -> dict[str, Any]:
    stats: dict[str, Any] = json.loads(_get(f"{upstream}/stats")[1])
    return stats


def settle(upstream: str, expected: int, timeout: float) -> dict[str, Any]:
    """The upstream's counts once `expected` spans arrived or arrivals stopped for 5 s."""
    deadline = time.monotonic() + timeout
    stats = upstream_stats(upstream)
    quiet_since, last_count = time.monotonic(), stats["spans"]
    while stats["spans"] < expected and time.monotonic() < deadline:
        time.sleep(0.25)
        stats = upstream_stats(upstream)
        if stats["spans"] != last_count:
            quiet_since, last_count = time.monotonic(), stats["spans"]
        elif time.monotonic() - quiet_since > 5:
            break
    return stats


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process used so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def baseline(args: argparse.Namespace) -> None:
    """The harness alone: the sender straight to the counting upstream."""
    upstream = subprocess.Popen(
        [sys.executable, __file__, "--upstream"], stdout=subprocess.PIPE, text=True
    )
    assert upstream.stdout is not None
    url = f"http://127.0.0.1:{upstream.stdout.readline().strip()}"
    try:
        sent = run_sender(url, "plain", args.seconds, args.senders)
        stats = upstream_stats(url)
    finally:
        upstream.terminate()
        upstream.wait()
    print("0. the harness alone: sender -> counting upstream, no collector")
    print(
        f"   {stats['spans']:,} spans in {sent['seconds']:.1f} s: "
        f"{stats['spans'] / sent['seconds']:,.0f} spans/s"
    )


def scrape(ingest: str) -> dict[str, float]:
    """The collector's own metrics (Prometheus text), summed over their labels."""
    values: dict[str, float] = {}
    for line in _get(f"{ingest}/metrics")[1].decode().splitlines():
        if line.startswith("tracefact_"):
            name, value = line.split("{")[0], float(line.rsplit(" ", 1)[1])
            values[name] = values.get(name, 0.0) + value
    return values


def forwarding(args: argparse.Namespace, workdir: Path) -> None:
    with running_collector({"evaluation": {"enabled": False}}, workdir) as procs:
        cpu = cpu_seconds(procs.collector.pid)
        sent = run_sender(procs.ingest, "plain", args.seconds, args.senders)
        stats = settle(procs.upstream, sent["accepted"], timeout=120)
        cpu = cpu_seconds(procs.collector.pid) - cpu
        own = scrape(procs.ingest)
    elapsed = stats["last"] - sent["started"]
    print("1. forwarding, no evaluation (plain web spans, 4 a trace)")
    print(
        f"   received {sent['accepted']:,} spans in {sent['seconds']:.1f} s: "
        f"{sent['accepted'] / sent['seconds']:,.0f} spans/s "
        f"(429: {sent['refused']:,} spans; failed requests: {sent['failed_requests']})"
    )
    print(
        f"   forwarded {stats['spans']:,} spans in {stats['requests']:,} upstream requests by "
        f"{elapsed:.1f} s: {stats['spans'] / elapsed:,.0f} spans/s "
        f"(the collector counted {own.get('tracefact_collector_spans_received_total', 0):,.0f} "
        f"received, {own.get('tracefact_collector_spans_forwarded_total', 0):,.0f} forwarded)"
    )
    print(
        f"   the collector's CPU: {cpu:.1f} s, {cpu / stats['spans'] * 1e6:.1f} µs a span "
        f"({cpu / elapsed:.0%} of one core)"
    )


def evaluation(args: argparse.Namespace, workdir: Path) -> None:
    config = {"evaluation": {"enabled": True, "evaluators": ["local"], "window_seconds": 0.5}}
    with running_collector(config, workdir) as procs:
        sent = run_sender(procs.ingest, "llm", args.seconds, args.senders)
        # Evaluations go on after the sender stops: wait until nothing more arrives.
        stats = settle(procs.upstream, sys.maxsize, timeout=240)
    statuses = stats["statuses"]
    llm_spans = sent["accepted"] // 4
    evaluated = statuses.get("ok", 0)
    evaluating = stats["last_by_status"].get("ok", stats["last"]) - sent["started"]
    print(
        "2. LLM traffic (HTTP, chain, retriever, LLM span a trace), every LLM span sampled "
        "to the default evaluator (LocalFactuality)"
    )
    print(
        f"   received {sent['accepted']:,} spans in {sent['seconds']:.1f} s: "
        f"{sent['accepted'] / sent['seconds']:,.0f} spans/s, {llm_spans:,} of them LLM spans "
        f"(429: {sent['refused']:,} spans)"
    )
    print(
        f"   evaluated {evaluated:,} in {evaluating:.1f} s: {evaluated / evaluating:,.1f} "
        f"evaluations/s; dropped (evaluation queue full, forwarded unevaluated): "
        f"{statuses.get('dropped', 0):,} ({statuses.get('dropped', 0) / llm_spans:.1%})"
    )
    print(
        f"   upstream got {stats['spans']:,} spans (carrier spans included); "
        f"{STATUS_KEY}: {json.dumps(statuses, sort_keys=True)}"
    )


def memory(args: argparse.Namespace, workdir: Path) -> None:
    held = args.held
    config = {
        "evaluation": {
            "enabled": True,
            "evaluators": ["lexical"],
            "window_seconds": 600,
            "window_max_spans": held * 2,
            "queue_size": held * 2,
            "max_hold_seconds": 900,
        },
    }
    traces_per_batch = BATCH_SPANS // 4
    count = -(-held // traces_per_batch)
    bodies = batches("llm", count + 2, seed=7)
    with running_collector(config, workdir) as procs:
        parts = urlsplit(procs.ingest)

        def post(body: bytes) -> None:
            connection = http.client.HTTPConnection(parts.hostname or "", parts.port)
            connection.request("POST", "/v1/traces", body, {"Content-Type": PROTOBUF})
            status = connection.getresponse().status
            connection.close()
            if status != 200:
                raise RuntimeError(f"the collector answered {status}")

        for body in bodies[:2]:  # warm-up: code paths, allocator arenas
            post(body)
        time.sleep(2)
        before = rss_bytes(procs.collector.pid)
        waiting_before = scrape(procs.ingest).get("tracefact_collector_window_waiting", 0)
        for body in bodies[2:]:
            post(body)
        time.sleep(2)
        after = rss_bytes(procs.collector.pid)
        waiting = scrape(procs.ingest).get("tracefact_collector_window_waiting", 0)
    traces = int(waiting - waiting_before)
    print(
        "3. memory per held trace: its LLM span waiting in the window, the retriever's "
        "3 documents in the store (the other spans already forwarded)"
    )
    print(
        f"   {traces:,} more traces held: RSS {before / 2**20:.1f} MiB -> "
        f"{after / 2**20:.1f} MiB, {(after - before) / max(traces, 1) / 1024:.1f} KiB a trace"
    )


def post_all(ingest: str, bodies: list[bytes]) -> None:
    """Post every body in turn on one keep-alive connection; 200 each, or raise."""
    parts = urlsplit(ingest)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
    try:
        for body in bodies:
            connection.request("POST", "/v1/traces", body, {"Content-Type": PROTOBUF})
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"the collector answered {response.status}")
    finally:
        connection.close()


def cpu_per_span(config: dict[str, Any], bodies: list[bytes], workdir: Path) -> dict[str, Any]:
    """The collector's CPU seconds over posting `bodies` until every span arrived upstream."""
    expected = len(bodies) * BATCH_SPANS
    with running_collector(config, workdir) as procs:
        post_all(procs.ingest, bodies[:2])  # warm-up: imports, code paths, allocator arenas
        settle(procs.upstream, 2 * BATCH_SPANS, timeout=120)
        _post(f"{procs.upstream}/reset")
        cpu = cpu_seconds(procs.collector.pid)
        post_all(procs.ingest, bodies[2:])
        stats = settle(procs.upstream, expected - 2 * BATCH_SPANS, timeout=300)
        cpu = cpu_seconds(procs.collector.pid) - cpu
    return {"cpu": cpu, "stats": stats}


def evaluation_cpu(args: argparse.Namespace, workdir: Path) -> None:
    bodies = batches("llm", args.batches + 2, seed=11)
    llm_spans = args.batches * BATCH_SPANS // 4
    evaluating = {
        "evaluation": {
            "enabled": True,
            "evaluators": [{"import": "benchmarks.collector:instant"}],
            "window_seconds": 0,
            "queue_size": llm_spans * 2,
            "max_hold_seconds": 600,
        }
    }
    forwarding_only = {"evaluation": {"enabled": False}}
    per_span: list[float] = []
    evaluated: list[float] = []
    for _ in range(args.repeats):
        on = cpu_per_span(evaluating, bodies, workdir)
        off = cpu_per_span(forwarding_only, bodies, workdir)
        statuses = on["stats"]["statuses"]
        if statuses.get("ok", 0) != llm_spans:
            raise RuntimeError(f"expected {llm_spans} evaluated spans, got {statuses}")
        evaluated.append(on["cpu"] / llm_spans * 1e6)
        per_span.append((on["cpu"] - off["cpu"]) / llm_spans * 1e6)
    print(
        f"4. CPU per evaluated LLM span: {args.batches} batches, {llm_spans:,} LLM traces "
        f"(4 spans each), an evaluator that answers at once, {args.repeats} runs"
    )
    print(
        f"   the collector's CPU per LLM trace, evaluated: min {min(evaluated):,.0f} µs, "
        f"median {statistics.median(evaluated):,.0f} µs"
    )
    print(
        f"   of which evaluating the LLM span (minus the same traffic forwarded only): "
        f"min {min(per_span):,.0f} µs, median {statistics.median(per_span):,.0f} µs "
        f"(each run: {', '.join(f'{v:,.0f}' for v in per_span)})"
    )


# --- 5. the issue-30 rows: in this process, thread CPU time -----------------------------


ROW_GOALS = {
    "passthrough": "at most 1.0 µs",
    "engine": "at most 30 µs",
    "evaluation": "at most 100 µs",
}


class AsyncioForwarder:
    """The baseline: a plain asyncio OTLP/HTTP forwarder of the same bytes, on its own loop.

    It reads each POST's body by its Content-Length, posts the bytes unchanged to the
    upstream on one keep-alive connection, and answers 200 once the upstream did.
    """

    def __init__(self, upstream: str) -> None:
        import asyncio

        self._asyncio = asyncio
        self._upstream = urlsplit(upstream)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.port = 0
        threading.Thread(target=self._run, name="asyncio-forwarder", daemon=True).start()
        self._ready.wait(30)

    def _run(self) -> None:
        asyncio = self._asyncio
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()

    @staticmethod
    async def _read_message(reader: Any) -> tuple[bytes, bytes]:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        return head, await reader.readexactly(length)

    async def _serve(self, reader: Any, writer: Any) -> None:
        host, port = self._upstream.hostname, self._upstream.port
        up_reader, up_writer = await self._asyncio.open_connection(host, port)
        request = (
            f"POST /v1/traces HTTP/1.1\r\nHost: {host}\r\nContent-Type: {PROTOBUF}\r\n"
        ).encode()
        ok = ExportTraceServiceResponse().SerializeToString()
        reply = (
            f"HTTP/1.1 200 OK\r\nContent-Type: {PROTOBUF}\r\nContent-Length: {len(ok)}\r\n\r\n"
        ).encode() + ok
        try:
            while True:
                _, body = await self._read_message(reader)
                up_writer.write(request + b"Content-Length: %d\r\n\r\n" % len(body) + body)
                await self._read_message(up_reader)
                writer.write(reply)
        except (self._asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            up_writer.close()


class StdlibForwarder:
    """The HTTP stack the collector had before: http.server in, httpx out, nothing else.

    A `ThreadingHTTPServer` handler (the collector's receiver was one) reads each POST's
    body by its Content-Length and posts the bytes unchanged upstream with an
    `httpx.Client`, answering 200 once the upstream did: a thread per connection and
    httpx cost more than the whole of the collector's pass-through now.
    """

    def __init__(self, upstream: str) -> None:
        import httpx

        client = httpx.Client(timeout=60)
        url = f"{upstream}/v1/traces"
        ok = ExportTraceServiceResponse().SerializeToString()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                client.post(url, content=body, headers={"Content-Type": PROTOBUF})
                self.send_response(200)
                self.send_header("Content-Type", PROTOBUF)
                self.send_header("Content-Length", str(len(ok)))
                self.end_headers()
                self.wfile.write(ok)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        serve = threading.Thread(target=self._server.serve_forever, name="stdlib-forwarder")
        serve.daemon = True
        serve.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _thread_cpu(prefix: str) -> float:
    """CPU seconds of this process's live threads whose name starts with `prefix`."""
    total = 0.0
    for thread in threading.enumerate():
        if thread.name.startswith(prefix) and thread.ident is not None:
            with contextlib.suppress(OSError):  # ended meanwhile
                total += time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    return total


def _in_process_collector(upstream: str, evaluating: bool, queue_size: int) -> Any:
    from tracefact.collector.config import parse
    from tracefact.collector.service import Collector

    evaluation: dict[str, Any] = {"enabled": False}
    if evaluating:
        evaluation = {
            "enabled": True,
            "evaluators": [{"import": "benchmarks.collector:instant"}],
            "window_seconds": 0,
            "queue_size": queue_size,
            "max_hold_seconds": 600,
        }
    config = parse(
        {
            "receivers": {"http": {"host": "127.0.0.1", "port": 0}, "grpc": None},
            "upstreams": [{"endpoint": f"{upstream}/v1/traces"}],
            "evaluation": evaluation,
            "logging": {"level": "warning"},
        }
    )
    collector = Collector(config)
    port = collector.start()["http"]
    return collector, f"http://127.0.0.1:{port}"


def _posted_cpu(ingest: str, upstream: str, bodies: list[bytes]) -> float:
    """This process's CPU seconds, less this thread's, over posting `bodies` until all arrived."""
    _post(f"{upstream}/reset")
    started_process, started_thread = time.process_time(), time.thread_time()
    post_all(ingest, bodies)
    settle(upstream, len(bodies) * BATCH_SPANS, timeout=300)
    return (time.process_time() - started_process) - (time.thread_time() - started_thread)


def rows(args: argparse.Namespace, workdir: Path) -> None:
    """The issue's collector rows, as markdown table rows `| path | measured | goal |`.

    One process: the collectors (evaluation off; evaluation on with an evaluator that
    answers at once) and the asyncio forwarder run here, the upstream in its own process,
    and the posting thread's own CPU time is taken out. Rounds interleave the paths; each
    path's figure is the min and median over rounds, in µs of CPU per span (pass-through)
    or per LLM span (the engine's and the evaluation loop's threads).
    """
    plain = batches("plain", args.batches, seed=5)
    llm_templates = batches("llm", args.batches, seed=11)
    llm_spans = args.batches * BATCH_SPANS // 4
    upstream_process = subprocess.Popen(
        [sys.executable, __file__, "--upstream"], stdout=subprocess.PIPE, text=True
    )
    assert upstream_process.stdout is not None
    upstream = f"http://127.0.0.1:{upstream_process.stdout.readline().strip()}"
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks.collector:instant
    collectors: list[Any] = []
    floor: StdlibForwarder | None = None
    plain_spans = len(plain) * BATCH_SPANS
    figures: dict[str, list[float]] = {
        k: [] for k in ("codec", "asyncio", "stdlib", "off", "engine", "eval")
    }
    try:
        off, off_ingest = _in_process_collector(upstream, False, 0)
        collectors.append(off)
        # Room for every LLM span unless `--queue-size` makes the evaluator the bottleneck.
        on, on_ingest = _in_process_collector(upstream, True, args.queue_size or llm_spans * 2)
        collectors.append(on)
        forwarder = AsyncioForwarder(upstream)
        floor = StdlibForwarder(upstream)
        for round_ in range(args.repeats + 1):  # the first round warms up, uncounted
            started = time.thread_time()
            for body in plain:
                ExportTraceServiceRequest.FromString(body).SerializeToString()
            codec = (time.thread_time() - started) / plain_spans * 1e6
            forwarded = _posted_cpu(f"http://127.0.0.1:{forwarder.port}", upstream, plain)
            parts = _posted_cpu(f"http://127.0.0.1:{floor.port}", upstream, plain)
            passed = _posted_cpu(off_ingest, upstream, plain)
            bodies = [restamp(body, round_ + 1) for body in llm_templates]
            engine, evaluation = (
                _thread_cpu("tracefact-engine"),
                _thread_cpu("tracefact-evaluation"),
            )
            _posted_cpu(on_ingest, upstream, bodies)
            engine = _thread_cpu("tracefact-engine") - engine
            evaluation = _thread_cpu("tracefact-evaluation") - evaluation
            if round_ == 0:
                continue
            figures["codec"].append(codec)
            figures["asyncio"].append(forwarded / plain_spans * 1e6)
            figures["stdlib"].append(parts / plain_spans * 1e6)
            figures["off"].append(passed / plain_spans * 1e6)
            figures["engine"].append(engine / llm_spans * 1e6)
            figures["eval"].append(evaluation / llm_spans * 1e6)
    finally:
        for collector in collectors:
            collector.shutdown()
        if floor is not None:
            floor.close()
        upstream_process.kill()
        upstream_process.wait()

    def span(name: str) -> str:
        values = figures[name]
        return f"{min(values):.2f}-{statistics.median(values):.2f}"

    if not args.table:
        print(
            f"5. the issue's collector rows: {args.repeats} interleaved rounds of {args.batches} "
            f"batches (min-median, µs of CPU per span in this process, the poster's taken out)"
        )
        print("| path | measured | goal |")
        print("|---|---|---|")
    print(
        f"| collector pass-through, evaluation off | {span('off')} µs CPU per span "
        f"(decode + re-encode alone {span('codec')} µs; a plain asyncio forwarder of the same "
        f"bytes {span('asyncio')} µs; http.server in and httpx out alone, the stack it "
        f"replaced, {span('stdlib')} µs) | {ROW_GOALS['passthrough']} |"
    )
    print(
        f"| collector, LLM spans to an instant evaluator | {span('engine')} µs engine CPU per "
        f"LLM span, {span('eval')} µs on the evaluation thread | {ROW_GOALS['engine']} and "
        f"{ROW_GOALS['evaluation'].removeprefix('at most ')} |"
    )


def main() -> None:
    if sys.argv[1:2] == ["--upstream"]:
        serve_upstream()
        return
    if sys.argv[1:2] == ["--send"]:
        url, kind, seconds, senders = sys.argv[2:6]
        result = send(url, kind, float(seconds), int(senders), seed=os.getpid())
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="sending time per run")
    parser.add_argument("--senders", type=int, default=2, help="sender threads (connections)")
    parser.add_argument("--held", type=int, default=4000, help="traces held for the memory run")
    parser.add_argument("--batches", type=int, default=40, help="batches per CPU run")
    parser.add_argument("--repeats", type=int, default=5, help="CPU runs")
    parser.add_argument(
        "--only",
        choices=["forwarding", "cpu", "rows"],
        help="run only pass-through (1), CPU (4) or the issue's rows (5)",
    )
    parser.add_argument(
        "--queue-size",
        type=int,
        help="evaluation.queue_size of the rows' evaluating collector (default: room for all)",
    )
    parser.add_argument(
        "--table", action="store_true", help="only the rows of (5), for `make bench`'s table"
    )
    args = parser.parse_args()
    if args.table:
        args.only = "rows"
    else:
        print(f"cores: {os.cpu_count()}; batches of {BATCH_SPANS} spans over OTLP/HTTP protobuf")
    with tempfile.TemporaryDirectory(prefix="tracefact-bench-") as directory:
        workdir = Path(directory)
        if args.only is not None:
            {"forwarding": forwarding, "cpu": evaluation_cpu, "rows": rows}[args.only](
                args, workdir
            )
            return
        baseline(args)
        forwarding(args, workdir)
        evaluation(args, workdir)
        memory(args, workdir)
        evaluation_cpu(args, workdir)
        rows(args, workdir)


if __name__ == "__main__":
    main()
