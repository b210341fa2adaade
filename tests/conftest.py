"""Shared fixtures: a fresh global tracer provider per test, spans read back in memory."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

import tracefact

# Test modules import litellm directly; like tracefact, they must never make it fetch its
# price table over the network (it retries for seconds and logs warnings when offline).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def reset_global_tracer_provider() -> None:
    """OpenTelemetry allows setting the global provider once; tests need a new one each."""
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


class Spans:
    """The exporter behind `tracefact.configure`, read after a flush."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    def reconfigure(self, **options: Any) -> None:
        """Configure again with other options; the old exporter is shut down with its processor."""
        self.exporter = InMemorySpanExporter()
        tracefact.configure(exporter=self.exporter, **options)

    def all(self) -> list[ReadableSpan]:
        assert tracefact.force_flush(10_000)
        return list(self.exporter.get_finished_spans())

    def one(self, name: str) -> ReadableSpan:
        matching = [s for s in self.all() if s.name == name]
        assert len(matching) == 1, [s.name for s in self.all()]
        return matching[0]


@pytest.fixture
def fresh_globals() -> Iterator[None]:
    """For tests that call `tracefact.configure` themselves: a new provider, shut after."""
    reset_global_tracer_provider()
    yield
    tracefact.shutdown()
    reset_global_tracer_provider()


@pytest.fixture
def spans() -> Iterator[Spans]:
    reset_global_tracer_provider()
    exporter = InMemorySpanExporter()
    tracefact.configure(service_name="tracefact-tests", exporter=exporter)
    yield Spans(exporter)
    tracefact.shutdown()
    reset_global_tracer_provider()
