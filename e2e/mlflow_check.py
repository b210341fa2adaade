"""End to end with MLflow.

The demo's spans arrive over OTLP, its evaluations as assessments, and both are read back through
MLflow's REST API.

Run by `make e2e` with the project's Python, from the repository root:
    python -m e2e.mlflow_check
"""

from __future__ import annotations

import base64
import math
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from e2e.backend import VENVS, Stopwatch, eventually, free_port, run_demo, running
from examples.rag_demo import QUESTIONS

EVALUATOR = "hallucination"


def mlflow_command(port: int, workdir: str) -> list[str]:
    return [
        str(VENVS / "mlflow" / "bin" / "mlflow"),
        "server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--backend-store-uri",
        f"sqlite:///{workdir}/mlflow.db",
        "--default-artifact-root",
        f"{workdir}/artifacts",
    ]


# No telemetry, no background job runner.
MLFLOW_ENV = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
}


def attribute_value(value: dict[str, Any]) -> Any:
    """An OTLP AnyValue, as MLflow returns it in JSON, as a plain Python value."""
    if "array_value" in value:
        return [attribute_value(v) for v in value["array_value"].get("values", [])]
    ((_, plain),) = value.items()
    return plain


def traces(client: httpx.Client, experiment_id: str) -> list[dict[str, Any]]:
    """Every demo trace with its spans and assessments, once all have arrived."""
    location = {"type": "MLFLOW_EXPERIMENT", "mlflow_experiment": {"experiment_id": experiment_id}}
    body = {"locations": [location], "max_results": 100}
    found = client.post("/api/3.0/mlflow/traces/search", json=body).json().get("traces", [])
    assert len(found) == len(QUESTIONS), f"{len(found)} of {len(QUESTIONS)} traces"
    full = []
    for info in found:
        params = {"trace_id": info["trace_id"]}
        trace = client.get("/api/3.0/mlflow/traces/get", params=params).json()["trace"]
        assert len(trace.get("spans", [])) == 3, trace  # chain, retriever, LLM
        assessments = trace["trace_info"].get("assessments", [])
        assert any(a["assessment_name"] == EVALUATOR for a in assessments), trace["trace_info"]
        full.append(trace)
    return full


def check_trace(trace: dict[str, Any]) -> None:
    """The LLM span's result attributes equal the assessment logged for that span."""
    (llm,) = [
        span
        for span in trace["spans"]
        if any(
            a["key"] == "openinference.span.kind" and a["value"] == {"string_value": "LLM"}
            for a in span["attributes"]
        )
    ]
    attributes = {a["key"]: attribute_value(a["value"]) for a in llm["attributes"]}
    assert attributes["input.value"] and attributes["output.value"], attributes
    assert attributes["tracefact.eval.status"] == "ok", attributes
    span_id = base64.b64decode(llm["span_id"]).hex()
    (assessment,) = [
        a
        for a in trace["trace_info"]["assessments"]
        if a["assessment_name"] == EVALUATOR and a.get("span_id") == span_id
    ]
    prefix = f"tracefact.eval.{EVALUATOR}"
    assert assessment["feedback"]["value"] == attributes[f"{prefix}.label"], assessment
    assert math.isclose(float(assessment["metadata"]["score"]), attributes[f"{prefix}.score"])
    assert assessment["rationale"] == attributes[f"{prefix}.explanation"], assessment
    assert assessment["rationale"], assessment


def main() -> None:
    watch = Stopwatch("mlflow")
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="tracefact-mlflow-") as workdir, ExitStack() as stack:
        with watch.stage("startup"):
            log = Path(workdir) / "mlflow.log"
            command = mlflow_command(port, workdir)
            stack.enter_context(running(command, MLFLOW_ENV, f"{base_url}/health", log))
        client = stack.enter_context(httpx.Client(base_url=base_url, timeout=30))
        with watch.stage("demo"):
            created = client.post("/api/2.0/mlflow/experiments/create", json={"name": "rag-demo"})
            experiment_id = created.raise_for_status().json()["experiment_id"]
            header = f"x-mlflow-experiment-id={experiment_id}"
            run_demo("--endpoint", base_url, "--header", header, "--mlflow", base_url)
        with watch.stage("checks"):
            for trace in eventually(lambda: traces(client, experiment_id)):
                check_trace(trace)
            print(
                f"[mlflow] {len(QUESTIONS)} traces, each LLM span with its assessment", flush=True
            )
        with watch.stage("stop"):
            stack.close()
    watch.report()


if __name__ == "__main__":
    main()
