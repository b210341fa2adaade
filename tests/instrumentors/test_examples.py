"""The README's "Already instrumented?" examples run as written, against the fake server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.openai_server import API_KEY, fake_openai, user_environment

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    "example",
    [
        "openinference_openai.py",
        "genai_openai_v2.py",
        "openllmetry_openai.py",
        "langchain_openinference.py",
    ],
)
def test_example_prints_its_llm_span_with_a_label(example: str) -> None:
    with fake_openai() as server:
        server.reply("The Eiffel Tower is 330 metres tall.")
        env = {
            **user_environment(),
            "OPENAI_BASE_URL": server.api_base,
            "OPENAI_API_KEY": API_KEY,
        }
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / example)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert "The Eiffel Tower is 330 metres tall." in done.stdout
    assert '"tracefact.eval.hallucination.label": "factual"' in done.stdout
