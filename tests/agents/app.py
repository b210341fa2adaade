"""An agent app that knows nothing of tracefact: its spans go over OTLP to a collector.

    python tests/agents/app.py FRAMEWORK

Runs the framework's agent (tests/fakes/agents.py) four times against OPENAI_BASE_URL:
answers come plain, then streamed, and the fake model decides what each final answer is.
Exports with the SDK's OTLP/HTTP exporter, configured by the OTEL_EXPORTER_OTLP_* variables.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.fakes.agents import FRAMEWORKS


def main() -> None:
    name = sys.argv[1]
    provider = TracerProvider(resource=Resource.create({"service.name": f"agent-{name}"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    undo = FRAMEWORKS[name].instrument(provider)
    try:
        for stream in (False, False, True, True):
            print(FRAMEWORKS[name].run(os.environ["OPENAI_BASE_URL"], stream), flush=True)
    finally:
        undo()
        provider.shutdown()


if __name__ == "__main__":
    main()
