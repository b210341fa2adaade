"""An app instrumented only with OpenInference sends to the collector; upstream gets it evaluated.

compose.yaml's `demo` service (examples/openinference_collector.py, no tracefact import)
against the fake OpenAI server, exporting to its `tracefact` service, which forwards to a
real OTLP receiver: both started with the command lines and environment of those files.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

from tests.collector.deployment import compose_collector, compose_service, local_command
from tests.fakes.openai_server import API_KEY, fake_openai
from tests.fakes.otlp import otlp_receiver
from tracefact import semconv

GROUNDED = "The Eiffel Tower is 330 metres tall."
INVENTED = "Python was created by James Gosling at Sun Microsystems in 1995."
LABEL = semconv.eval_attribute("hallucination", "label")


def attributes(span: Any) -> dict[str, str]:
    return {a.key: a.value.string_value for a in span.attributes}


def test_the_example_app_does_not_use_tracefact() -> None:
    [script] = [arg for arg in local_command("demo") if arg.endswith(".py")]
    source = Path(script).read_text(encoding="utf-8")
    assert not re.search(r"^\s*(import|from)\s+tracefact\b", source, re.MULTILINE)


def test_openinference_app_to_collector_to_upstream_arrives_evaluated() -> None:
    with (
        fake_openai() as server,
        otlp_receiver() as upstream,
        compose_collector(upstream.endpoint) as collector,
    ):
        server.reply(GROUNDED, INVENTED)
        env = {
            **os.environ,
            **compose_service("demo")["environment"],
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.http,
            "OPENAI_BASE_URL": server.api_base,
            "OPENAI_API_KEY": API_KEY,
        }
        done = subprocess.run(
            local_command("demo"), env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        upstream.wait_for(6, timeout=60)  # two traces: chain, retriever, LLM span each
    assert collector.process.returncode == 0, "".join(collector.lines)[-3000:]
    assert GROUNDED in done.stdout and INVENTED in done.stdout
    spans = [attributes(span) for _, span in upstream.spans()]
    assert len(spans) == 6
    kinds = sorted(s["openinference.span.kind"] for s in spans)
    assert kinds == ["CHAIN", "CHAIN", "LLM", "LLM", "RETRIEVER", "RETRIEVER"]
    llm = [s for s in spans if s["openinference.span.kind"] == "LLM"]
    for span in llm:
        assert span[semconv.EVAL_STATUS] == semconv.STATUS_OK, span
        assert span[semconv.CONTEXTS_SOURCE] == "retrieval", span
    labels = {s["llm.output_messages.0.message.content"]: s[LABEL] for s in llm}
    assert labels == {GROUNDED: "factual", INVENTED: "hallucinated"}
    for span in spans:
        if span["openinference.span.kind"] != "LLM":
            assert not any(key.startswith("tracefact.") for key in span), span
