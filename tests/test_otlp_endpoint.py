"""`configure()`'s OTLP exporter when nothing listens.

It says where it tried, once, and fails at once instead of retrying for its whole
timeout; once something listens, it exports.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.fakes.otlp import otlp_receiver
from tests.sinks.helpers import closed_port_url
from tracefact._configure import otlp_endpoint
from tracefact.export import Unreachable

SPAN = ReadableSpan(name="answer")


def test_a_refused_endpoint_fails_without_calling_the_exporter() -> None:
    inner = InMemorySpanExporter()
    exporter = Unreachable(inner, closed_port_url() + "/v1/traces")
    assert exporter.export([SPAN]) == SpanExportResult.FAILURE
    assert exporter.export([SPAN]) == SpanExportResult.FAILURE
    assert inner.get_finished_spans() == ()


def test_a_listening_endpoint_gets_every_batch() -> None:
    inner = InMemorySpanExporter()
    with otlp_receiver() as receiver:
        exporter = Unreachable(inner, receiver.endpoint + "/v1/traces")
        assert exporter.export([SPAN]) == SpanExportResult.SUCCESS
        assert exporter.export([SPAN]) == SpanExportResult.SUCCESS
    assert len(inner.get_finished_spans()) == 2


def test_the_endpoint_is_the_setting_else_otel_variables_else_localhost() -> None:
    assert otlp_endpoint("http://c:4318", {}) == "http://c:4318/v1/traces"
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://base:4318/"}
    assert otlp_endpoint(None, environ) == "http://base:4318/v1/traces"
    environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://traces:1/v1/traces"
    assert otlp_endpoint(None, environ) == "http://traces:1/v1/traces"
    assert otlp_endpoint(None, {}) == "http://localhost:4318/v1/traces"


def test_a_script_with_nothing_listening_says_once_where_it_tried() -> None:
    endpoint = closed_port_url()
    script = textwrap.dedent(
        """
        import tracefact
        tracefact.configure(service_name="nothing-listens", evaluators=[])
        with tracefact.span("answer", kind="llm") as span:
            span.record(input="q", contexts=["c"], output="o")
        tracefact.shutdown()
        print("done")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "PATH": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr
    assert done.stderr.count(endpoint) == 1, done.stderr
    assert "configure(endpoint=...)" in done.stderr
    assert "Transient error" not in done.stderr and "Traceback" not in done.stderr


def test_through_a_proxy_the_export_itself_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    """A direct connection says nothing about an endpoint reached through a proxy."""
    monkeypatch.setenv("http_proxy", "http://proxy.invalid:3128")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    inner = InMemorySpanExporter()
    exporter = Unreachable(inner, "http://backend.invalid:4318/v1/traces")
    assert exporter.export([SPAN]) == SpanExportResult.SUCCESS
    assert len(inner.get_finished_spans()) == 1
