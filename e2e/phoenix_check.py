"""End to end with Arize Phoenix.

The demo's spans and evaluations, read back through Phoenix's REST API, then looked at in a real
browser.

Run by `make e2e` with the project's Python, from the repository root:
    python -m e2e.phoenix_check
"""

from __future__ import annotations

import math
import subprocess
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from e2e.backend import ROOT, VENVS, Stopwatch, eventually, free_port, run_demo, running
from examples.rag_demo import QUESTIONS

SCREENSHOT = ROOT / "docs" / "img" / "phoenix-trace.png"
EVALUATOR = "hallucination"


def phoenix_env(port: int, grpc_port: int, workdir: str) -> dict[str, str]:
    """Loopback only, no telemetry, no external resources, no agent features."""
    return {
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_WORKING_DIR": workdir,
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
        "PHOENIX_AGENTS_DISABLE_BASH": "true",
        "PHOENIX_AGENTS_DISABLE_WEB_ACCESS": "true",
        "PHOENIX_AGENTS_DISABLE_GITHUB": "true",
        "PHOENIX_ENABLE_MCP_SERVER": "false",
    }


def llm_spans(client: httpx.Client) -> list[dict[str, Any]]:
    """The demo's LLM spans, once every trace has its chain, retriever and LLM span."""
    spans = client.get("/v1/projects/default/spans", params={"limit": 1000}).json()["data"]
    kinds = sorted(s["span_kind"] for s in spans)
    assert kinds == sorted(["CHAIN", "RETRIEVER", "LLM"] * len(QUESTIONS)), kinds
    llms = [s for s in spans if s["span_kind"] == "LLM"]
    for span in llms:
        attributes = span["attributes"]
        assert attributes["input.value"] and attributes["output.value"], attributes
        assert attributes["tracefact.contexts"], attributes
        assert attributes["tracefact.eval.status"] == "ok", attributes
    return llms


def annotations(client: httpx.Client, spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each span's tracefact annotation, once Phoenix has stored one for every span."""
    ids = [s["context"]["span_id"] for s in spans]
    params = {"span_ids": ids, "limit": 1000}
    data = client.get("/v1/projects/default/span_annotations", params=params).json()["data"]
    found = {a["span_id"]: a for a in data if a["name"] == EVALUATOR}
    assert sorted(found) == sorted(ids), f"{len(found)} of {len(ids)} spans annotated"
    return found


def check_annotation(span: dict[str, Any], annotation: dict[str, Any]) -> None:
    attributes = span["attributes"]
    result = annotation["result"]
    prefix = f"tracefact.eval.{EVALUATOR}"
    assert result["label"] == attributes[f"{prefix}.label"], (result, attributes)
    assert math.isclose(result["score"], attributes[f"{prefix}.score"]), (result, attributes)
    assert result["explanation"] == attributes[f"{prefix}.explanation"], (result, attributes)
    assert result["explanation"], result
    kind = attributes["evaluations.0.evaluation.annotator_kind"]
    assert annotation["annotator_kind"] == kind, annotation


def look_in_browser(base_url: str, client: httpx.Client, span: dict[str, Any]) -> None:
    """Open the trace view of one hallucinated answer and save what a person sees."""
    project = next(p for p in client.get("/v1/projects").json()["data"] if p["name"] == "default")
    trace_id = span["context"]["trace_id"]
    url = f"{base_url}/projects/{project['id']}/traces/{trace_id}?selectedSpanNodeId={span['id']}"
    attributes = span["attributes"]
    command = [
        str(VENVS / "browser" / "bin" / "python"),
        str(ROOT / "e2e" / "phoenix_browser.py"),
        url,
        attributes[f"tracefact.eval.{EVALUATOR}.label"],
        attributes[f"tracefact.eval.{EVALUATOR}.explanation"],
        str(SCREENSHOT),
    ]
    subprocess.run(command, check=True, timeout=300)


def main() -> None:
    watch = Stopwatch("phoenix")
    port, grpc_port = free_port(), free_port()
    base_url = f"http://127.0.0.1:{port}"
    label, score = f"tracefact.eval.{EVALUATOR}.label", f"tracefact.eval.{EVALUATOR}.score"
    with tempfile.TemporaryDirectory(prefix="tracefact-phoenix-") as workdir, ExitStack() as stack:
        with watch.stage("startup"):
            command = [str(VENVS / "phoenix" / "bin" / "phoenix"), "serve"]
            env = phoenix_env(port, grpc_port, workdir)
            log = Path(workdir) / "phoenix.log"
            stack.enter_context(running(command, env, f"{base_url}/healthz", log))
        with watch.stage("demo"):
            run_demo("--endpoint", base_url, "--phoenix", base_url)
        client = stack.enter_context(httpx.Client(base_url=base_url, timeout=30))
        with watch.stage("checks"):
            spans = eventually(lambda: llm_spans(client))
            found = eventually(lambda: annotations(client, spans))
            for span in spans:
                check_annotation(span, found[span["context"]["span_id"]])
            print(f"[phoenix] {len(spans)} LLM spans, each with its annotation", flush=True)
        with watch.stage("browser"):
            hallucinated = [s for s in spans if s["attributes"][label] == "hallucinated"]
            assert hallucinated, "the demo should produce at least one hallucination"
            look_in_browser(
                base_url, client, max(hallucinated, key=lambda s: s["attributes"][score])
            )
        with watch.stage("stop"):
            stack.close()
    watch.report()


if __name__ == "__main__":
    main()
