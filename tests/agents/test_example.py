"""examples/agent_pydantic_ai.py runs as written, against the fake server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.fakes.agents import ANSWERS, AgentModel
from tests.fakes.instrumentors import DOCUMENT
from tests.fakes.openai_server import API_KEY, fake_openai, user_environment
from tracefact import semconv

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_pydantic_ai.py"


def test_the_agent_example_prints_its_answer_judged_on_the_tool_result() -> None:
    with fake_openai() as server:
        server.responder = AgentModel([ANSWERS["grounded"]])
        env = {
            **user_environment(),
            "OPENAI_BASE_URL": server.api_base,
            "OPENAI_API_KEY": API_KEY,
        }
        done = subprocess.run(
            [sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert ANSWERS["grounded"] in lines
    spans = printed_spans("\n".join(line for line in lines if line != ANSWERS["grounded"]))
    judged = [s["attributes"] for s in spans if semconv.CONTEXTS_SOURCE in s["attributes"]]
    [attributes] = judged
    assert attributes[semconv.CONTEXTS_SOURCE] == semconv.CONTEXT_SOURCE_TOOL
    assert attributes[semconv.CONTEXTS] == [DOCUMENT]
    assert attributes[semconv.eval_attribute("hallucination", "label")] == "factual"


def printed_spans(text: str) -> list[dict[str, Any]]:
    """The spans the console exporter printed, one JSON object after another."""
    decoder, spans, at = json.JSONDecoder(), [], 0
    while (at := text.find("{", at)) >= 0:
        span, at = decoder.raw_decode(text, at)
        spans.append(span)
    return spans
