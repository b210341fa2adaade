"""A dependency's warning never ends an evaluation, even where the host makes warnings errors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# The host runs with every warning an error (`python -W error`); its evaluator imports a
# dependency that warns on import and warns again on each call, as litellm under a newer
# pydantic did. The app's own warnings must still be errors.
APP = textwrap.dedent(
    """
    import asyncio, importlib, json, warnings

    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import tracefact
    from tracefact.evaluators import EvalCase, EvalResult

    class WarningJudge:
        name = "hallucination"

        async def evaluate(self, case: EvalCase) -> EvalResult:
            noisy = importlib.import_module("noisy_dependency")
            await asyncio.to_thread(noisy.call)
            return EvalResult(name=self.name, label="factual", score=0.1, evaluator="warning-judge")

        def describe(self) -> dict[str, object]:
            return {"name": self.name}

    exporter = InMemorySpanExporter()
    tracefact.configure(exporter=exporter, evaluators=[WarningJudge()])

    @tracefact.llm(model="m")
    def answer(question: str, contexts: list[str]) -> str:
        return "Paris."

    answer("Capital of France?", ["Paris is the capital of France."])
    tracefact.force_flush(10_000)
    try:
        warnings.warn("the app's own warning", UserWarning)
        app_warning = "not raised"
    except UserWarning:
        app_warning = "raised"
    tracefact.shutdown()
    (span,) = exporter.get_finished_spans()
    print(json.dumps({
        "status": span.attributes.get("tracefact.eval.status"),
        "label": span.attributes.get("tracefact.eval.hallucination.label"),
        "error": span.attributes.get("tracefact.eval.error"),
        "app_warning": app_warning,
    }))
    """
)

NOISY = textwrap.dedent(
    """
    import warnings

    warnings.warn("Items 'a', 'b' on TypedDict class 'X' are using the `ReadOnly` qualifier")

    def call() -> None:
        warnings.warn("deprecated in the next release", DeprecationWarning)
    """
)


@pytest.mark.parametrize("flag", ["error", "error::UserWarning"])
def test_evaluation_is_ok_when_host_turns_warnings_into_errors(tmp_path: Path, flag: str) -> None:
    (tmp_path / "noisy_dependency.py").write_text(NOISY)
    (tmp_path / "app.py").write_text(APP)
    done = subprocess.run(
        [sys.executable, "-W", flag, "-W", "error::DeprecationWarning", "app.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome == {
        "status": "ok",
        "label": "factual",
        "error": None,
        "app_warning": "raised",
    }
