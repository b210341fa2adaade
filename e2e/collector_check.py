"""End to end: an app instrumented only with OpenInference → tracefact collector → Phoenix.

compose.yaml's `demo` and `tracefact` services, started with their own command lines
(tests/collector/deployment.py), the demo against the fake OpenAI server; Phoenix is
real. The spans are read back through Phoenix's REST API: every span of the app is
there, its LLM spans carry the collector's evaluation, and each LLM span has the
collector's result as a Phoenix span annotation (collector/phoenix.yaml's sink).

Run by `make e2e` with the instrumentors' environment (the demo needs openai and the
OpenInference instrumentor, the collector the `collector` extra), from the repository root:
    .venv-instrumentors/bin/python -m e2e.collector_check
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from e2e.backend import VENVS, Stopwatch, eventually, free_port, running
from e2e.phoenix_check import annotations, check_annotation, phoenix_env
from tests.collector.deployment import compose_collector, compose_service, local_command
from tests.fakes.openai_server import API_KEY, fake_openai

ANSWERS = {
    "The Eiffel Tower is 330 metres tall.": "factual",
    "Python was created by James Gosling at Sun Microsystems in 1995.": "hallucinated",
}
LABEL = "tracefact.eval.hallucination.label"


def run_app(collector: str, openai_base: str) -> None:
    env = {
        **os.environ,
        **compose_service("demo")["environment"],
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector,
        "OPENAI_BASE_URL": openai_base,
        "OPENAI_API_KEY": API_KEY,
    }
    command = local_command("demo")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"the app failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    print(done.stdout.strip(), flush=True)


def app_spans(client: httpx.Client) -> list[dict[str, Any]]:
    """The app's spans in Phoenix, once both traces are complete and evaluated."""
    spans: list[dict[str, Any]] = client.get(
        "/v1/projects/default/spans", params={"limit": 1000}
    ).json()["data"]
    kinds = sorted(s["span_kind"] for s in spans)
    assert kinds == ["CHAIN", "CHAIN", "LLM", "LLM", "RETRIEVER", "RETRIEVER"], kinds
    return spans


def check(spans: list[dict[str, Any]]) -> None:
    labels = {}
    for span in spans:
        attributes = span["attributes"]
        evaluated = {k for k in attributes if k.startswith("tracefact.")}
        if span["span_kind"] != "LLM":
            assert not evaluated, (span["name"], evaluated)
            continue
        assert attributes["tracefact.eval.status"] == "ok", attributes
        assert attributes["tracefact.contexts.source"] == "retrieval", attributes
        assert attributes["tracefact.eval.hallucination.explanation"], attributes
        answer = attributes["llm.output_messages.0.message.content"]
        labels[answer] = attributes[LABEL]
    assert labels == ANSWERS, labels


def main() -> None:
    watch = Stopwatch("collector")
    port, grpc_port = free_port(), free_port()
    base_url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="tracefact-phoenix-") as workdir, ExitStack() as stack:
        with watch.stage("phoenix startup"):
            command = [str(VENVS / "phoenix" / "bin" / "phoenix"), "serve"]
            env = phoenix_env(port, grpc_port, workdir)
            log = Path(workdir) / "phoenix.log"
            stack.enter_context(running(command, env, f"{base_url}/healthz", log))
        with watch.stage("collector startup"):
            collector = stack.enter_context(compose_collector(base_url))
        with watch.stage("app"):
            server = stack.enter_context(fake_openai())
            server.reply(*ANSWERS)
            run_app(collector.http, server.api_base)
        client = stack.enter_context(httpx.Client(base_url=base_url, timeout=30))
        with watch.stage("checks"):
            spans = eventually(lambda: app_spans(client))
            check(spans)
            print(f"[collector] {len(spans)} spans in Phoenix, LLM spans evaluated", flush=True)
            llms = [s for s in spans if s["span_kind"] == "LLM"]
            found = eventually(lambda: annotations(client, llms))
            for span in llms:
                check_annotation(span, found[span["context"]["span_id"]])
            print(f"[collector] {len(found)} span annotations in Phoenix", flush=True)
        with watch.stage("stop"):
            stack.close()
        if collector.process.returncode != 0:
            log = "".join(collector.lines)[-3000:]
            raise RuntimeError(f"the collector did not drain cleanly:\n{log}")
    watch.report()


if __name__ == "__main__":
    main()
