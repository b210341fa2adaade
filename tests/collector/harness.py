"""The collector as users run it: `tracefact collector --config FILE`, in a subprocess.

`running_collector` writes the configuration, starts the command, waits for its
`listening` log line (ports bound with port 0) and stops it with SIGTERM at the end.
Spans are sent with the SDK's own OTLP exporters, built from the recorded fixtures of
real instrumentors.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from tests.conventions.fixtures import FIXTURES, load
from tests.waiting import eventually
from tracefact.conventions.otlp import OtlpSpan

TRACEFACT = Path(sys.executable).parent / "tracefact"
RESOURCE = Resource.create({"service.name": "collector-test-app"})
SCOPE = InstrumentationScope("collector.tests", "1.0")


class CollectorProcess:
    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self.ports: dict[str, int] = {}
        self._listening = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            event = self._event(line)
            if event.get("event") in ("listening", "started"):  # a worker only starts
                self.ports = {k: event[k] for k in ("http", "grpc", "metrics") if k in event}
                self._listening.set()

    @staticmethod
    def _event(line: str) -> dict[str, Any]:
        try:
            event = json.loads(line)
        except ValueError:
            return {}
        return event if isinstance(event, dict) else {}

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in map(self._event, list(self.lines)) if e.get("event") == name]

    def wait_listening(self, timeout: float = 60.0) -> None:
        if not self._listening.wait(timeout):
            self.process.kill()
            raise AssertionError("collector never listened:\n" + "".join(self.lines))

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.ports['http']}"

    @property
    def grpc(self) -> str:
        return f"127.0.0.1:{self.ports['grpc']}"

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait for the drained exit; its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        self._reader.join(5)
        if self.process.stderr is not None:
            self.process.stderr.close()
        return code


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


ROOT = Path(__file__).resolve().parents[2]


def start(config_path: Path, env: dict[str, str] | None = None) -> CollectorProcess:
    """The command, with the repository on its path (for `tests.collector.evaluators`)."""
    environment = {**os.environ, **(env or {})}
    environment["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), environment.get("PYTHONPATH", "")) if p
    )
    process = subprocess.Popen(
        [str(TRACEFACT), "collector", "--config", str(config_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )
    return CollectorProcess(process)


@contextmanager
def running_collector(path: Path, config: dict[str, Any]) -> Iterator[CollectorProcess]:
    collector = start(write_config(path, config))
    try:
        collector.wait_listening()
        yield collector
    finally:
        if collector.process.poll() is None:
            collector.terminate()


def base_config(upstream: str, **evaluation: Any) -> dict[str, Any]:
    """Both receivers on free ports of 127.0.0.1, one HTTP upstream, a fast evaluator."""
    return {
        "receivers": {
            "http": {"host": "127.0.0.1", "port": 0},
            "grpc": {"host": "127.0.0.1", "port": 0},
        },
        "upstreams": [{"endpoint": upstream}],
        "forwarding": {"retry_base_seconds": 0.05, "retry_max_seconds": 0.2},
        "evaluation": {
            "evaluators": ["lexical"],
            "window_seconds": 0.3,
            "drain_seconds": 3,
            **evaluation,
        },
        "drain_seconds": 10,
    }


def sdk_spans(
    otlp_spans: Sequence[OtlpSpan], trace_id: int | None = None, resource: Resource = RESOURCE
) -> list[ReadableSpan]:
    """Fixture spans as the SDK's ended spans, ready for a real exporter.

    `trace_id` moves them to another trace (so one fixture can be sent many times).
    """
    out = []
    for span in otlp_spans:
        tid = trace_id if trace_id is not None else span.trace_id
        parent = None
        if span.parent_span_id is not None:
            parent = SpanContext(tid, span.parent_span_id, False, TraceFlags(1))
        out.append(
            ReadableSpan(
                name=span.name,
                context=SpanContext(tid, span.span_id, False, TraceFlags(1)),
                parent=parent,
                resource=resource,
                attributes=dict(span.attributes),
                events=[Event(n, dict(a), timestamp=span.end_time) for n, a in span.events],
                kind=SpanKind.INTERNAL,
                start_time=span.start_time,
                end_time=span.end_time,
                instrumentation_scope=SCOPE,
            )
        )
    return out


def fixture_spans(
    name: str, trace_id: int | None = None, directory: Path = FIXTURES
) -> list[ReadableSpan]:
    return sdk_spans(load(name, directory), trace_id)


def attributes(span: Span) -> dict[str, Any]:
    from tracefact.collector.spans import attributes as decode

    return decode(span.attributes)


def wait_until(predicate: Any, timeout: float = 15.0, interval: float = 0.05) -> bool:
    """`tests.waiting.eventually`, with the collector tests' bound and pace."""
    return eventually(predicate, timeout, interval)
