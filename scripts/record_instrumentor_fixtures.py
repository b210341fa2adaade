"""Record what real instrumentors put on their LLM spans, as small OTLP/JSON files.

For each instrumentor, a grounded and an invented answer, plain and streaming, against
the fake OpenAI server on 127.0.0.1 (plus a LangChain trace with a retriever span).
Each instrumentor runs in its own subprocess: two instrumentors of the openai SDK cannot
both be active in one process. Ids, times and the server's port are normalised so the
files only change when an instrumentor changes what it emits.

    make fixtures   # .venv-instrumentors (the `instrumentors` extra), every unpinned one

An instrumentor pinned to an older release (`Instrumentor.pinned`, e.g. OpenLLMetry's
last indexed-attribute openai release) is recorded only when named, from a scratch venv
outside the repository that has that release, the SDK and the OTLP encoder:

    python -m venv ../legacy-venv
    ../legacy-venv/bin/pip install opentelemetry-instrumentation-openai==0.54.0 \
        openai==3.54.0 opentelemetry-sdk opentelemetry-exporter-otlp-proto-common
    ../legacy-venv/bin/python scripts/record_instrumentor_fixtures.py \
        tests/fixtures/otlp --instrumentor openllmetry_legacy

OpenLLMetry's retriever spans likewise, from a venv with chromadb, langchain-core 1.7.2,
langchain-openai 1.7.3 and OpenLLMetry's chromadb, langchain and openai instrumentations
0.62.4: `--instrumentor openllmetry_chromadb --instrumentor openllmetry_langchain`.

With `--agents`, the agent frameworks of tests/fakes/agents.py instead (pydantic-ai, the
OpenAI Agents SDK, LangGraph: a tool call, then a grounded or an invented answer, plain
and streaming), from the `agents` extra's venv:

    make agent-fixtures   # into tests/fixtures/otlp-agents
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.agents import ANSWERS, FRAMEWORKS, run_agent  # noqa: E402
from tests.fakes.instrumentors import (  # noqa: E402
    INSTRUMENTORS,
    SCENARIOS,
    run_scenario,
)
from tests.fakes.openai_server import fake_openai  # noqa: E402

PORT_PLACEHOLDER = 4242
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory for the OTLP/JSON files")
    parser.add_argument(
        "--instrumentor",
        action="append",
        choices=sorted(INSTRUMENTORS),
        help="record only these (repeatable); default: every one not pinned to an old release",
    )
    parser.add_argument("--agents", action="store_true", help="record the agent frameworks instead")
    parser.add_argument("--only", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        (record_agent if args.agents else record)(args.only, args.out)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    if args.agents:
        for name in sorted(FRAMEWORKS):
            command = [sys.executable, __file__, str(args.out), "--agents", "--only", name]
            subprocess.run(command, check=True)
        return
    names = args.instrumentor or [n for n in sorted(INSTRUMENTORS) if not INSTRUMENTORS[n].pinned]
    for name in names:
        _check_pin(INSTRUMENTORS[name].pinned)
        env = {**os.environ, **INSTRUMENTORS[name].env}
        command = [sys.executable, __file__, str(args.out), "--only", name]
        subprocess.run(command, check=True, env=env)


def _check_pin(pinned: str | None) -> None:
    """Refuse to record an old release's fixtures with another release installed."""
    if pinned is None:
        return
    from importlib.metadata import PackageNotFoundError, version

    package, wanted = pinned.split("==")
    try:
        installed = version(package)
    except PackageNotFoundError:
        installed = "not installed"
    if installed != wanted:
        sys.exit(f"{pinned} is needed to record this instrumentor; this venv has {installed}")


class Recorder:
    """An SDK provider whose spans, one run at a time, are written as a fixture."""

    def __init__(self) -> None:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def write(self, path: Path, port: int) -> None:
        """The spans since the last write, normalised, as `path`."""
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        self.provider.force_flush()
        spans = self.exporter.get_finished_spans()
        self.exporter.clear()
        document = _normalise(encode_spans(spans), port)
        path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
        print(f"{path}: {len(spans)} spans")


def record(name: str, out: Path) -> None:
    recorder = Recorder()
    instrumentor = INSTRUMENTORS[name]
    with instrumentor.active(recorder.provider) as server:
        for scenario in SCENARIOS:
            if scenario.name not in instrumentor.scenarios:
                continue
            for stream in (False, True):
                run_scenario(name, scenario, stream, server, recorder.provider)
                path = out / f"{name}-{scenario.name}-{'stream' if stream else 'plain'}.json"
                recorder.write(path, server.api.server.server_address[1])


def record_agent(name: str, out: Path) -> None:
    """One framework's agent: a grounded and an invented final answer, plain and streaming."""
    recorder = Recorder()
    with fake_openai() as server:
        undo = FRAMEWORKS[name].instrument(recorder.provider)
        try:
            for scenario, answer in ANSWERS.items():
                for stream in (False, True):
                    run_agent(name, answer, stream, server)
                    path = out / f"{name}-{scenario}-{'stream' if stream else 'plain'}.json"
                    recorder.write(path, server.api.server.server_address[1])
        finally:
            undo()


def _normalise(request: Any, port: int) -> dict[str, Any]:
    """OTLP/JSON (hex ids) with sequential ids and times, and a fixed server port."""
    from google.protobuf.json_format import MessageToDict

    document: dict[str, Any] = MessageToDict(request)
    ids: dict[str, str] = {}

    def new_id(raw: str, width: int) -> str:
        key = base64.b64decode(raw).hex()
        if key not in ids:
            ids[key] = f"{len(ids) + 1:0{width}x}"
        return ids[key]

    spans = [s for rs in document["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    spans.sort(key=lambda s: int(s["startTimeUnixNano"]))
    for resource_spans in document["resourceSpans"]:
        resource_spans["resource"] = {"attributes": []}
    for index, span in enumerate(spans):
        span["traceId"] = new_id(span["traceId"], 32)
        for key in ("spanId", "parentSpanId"):
            if key in span:
                span[key] = new_id(span[key], 16)
        span["startTimeUnixNano"] = str(1_700_000_000_000_000_000 + index * 1_000_000)
        for event in span.get("events", []):
            event["timeUnixNano"] = str(1_700_000_000_000_000_000 + index * 1_000_000 + 1)
    for rank, span in enumerate(sorted(spans, key=lambda s: int(s["endTimeUnixNano"]))):
        span["endTimeUnixNano"] = str(1_700_000_000_100_000_000 + rank * 1_000_000)
        for attribute in span.get("attributes", []):
            _fix_volatile(attribute, port)
    return document


def _fix_volatile(attribute: dict[str, Any], port: int) -> None:
    """The fake server's port and run ids (LangChain's) change on every run."""
    value = attribute["value"]
    if "intValue" in value and value["intValue"] == str(port):
        value["intValue"] = str(PORT_PLACEHOLDER)
    if "stringValue" in value:
        text = value["stringValue"].replace(f":{port}", f":{PORT_PLACEHOLDER}")
        value["stringValue"] = _UUID.sub("00000000-0000-0000-0000-000000000000", text)


if __name__ == "__main__":
    main()
