"""Errors that say what to do: missing keys, refused keys and missing extras, quietly."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import tracefact
from tests.conftest import Spans
from tests.fakes.openai_server import MODEL, Canned, FakeOpenAI
from tracefact._retry import Backoff
from tracefact.cli import main
from tracefact.evaluators import CredentialsError, EvalCase, ProviderError
from tracefact.evaluators.judges import LLMJudge
from tracefact.pipeline.retry import RetryPolicy, run_evaluator

litellm = pytest.importorskip("litellm")

CASE = EvalCase(input="q", contexts=["The tower opened in 1889."], output="It opened in 1889.")
INSTALL = "pip install 'tracefact[litellm]' (from a clone: pip install -e '.[litellm]')"
RETRIES = RetryPolicy(timeout_seconds=10, max_retries=2, backoff=Backoff(0.01))


def cases_file(tmp_path: Path) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps({"id": "a", **CASE.model_dump()}) + "\n")
    return path


async def test_a_missing_key_is_permanent_and_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, openai_server: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = f"openai/unseen-{uuid.uuid4().hex[:8]}"  # logged once per process: a fresh one
    judge = LLMJudge(model, api_base=openai_server.api_base)
    with pytest.raises(CredentialsError, match="set OPENAI_API_KEY") as raised:
        await judge.evaluate(CASE)
    assert not raised.value.transient
    for _ in range(3):
        outcome = await run_evaluator(judge, CASE, RETRIES)
        assert outcome.status == "error" and "OPENAI_API_KEY" in (outcome.error or "")
    assert not openai_server.requests  # never sent, never retried
    logged = [r.getMessage() for r in caplog.records if "OPENAI_API_KEY" in r.getMessage()]
    assert len(logged) == 1  # the log says it once; each span carries it


async def test_refused_credentials_are_not_retried_and_no_banner_is_printed(
    openai_server: FakeOpenAI, capfd: pytest.CaptureFixture[str]
) -> None:
    openai_server.reply(Canned(status=401, content="Incorrect API key provided"))
    judge = LLMJudge(MODEL, **openai_server.options())
    before = litellm.suppress_debug_info
    outcome = await run_evaluator(judge, CASE, RETRIES)
    assert outcome.status == "error"
    assert "CredentialsError" in (outcome.error or "") and "check OPENAI_API_KEY" in outcome.error
    assert len(openai_server.requests) == 1
    printed = capfd.readouterr()
    assert "Give Feedback" not in printed.out + printed.err
    assert "LiteLLM.Info" not in printed.out + printed.err
    assert litellm.suppress_debug_info == before  # the user's setting is left as it was


def test_cli_reports_a_missing_key_once_before_evaluating(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "r.jsonl"
    argv = ["eval", str(cases_file(tmp_path)), "--out", str(out)]
    assert main([*argv, "--evaluator", "judge:openai/gpt-4o-mini"]) == 2
    err = capsys.readouterr().err
    assert err.count("OPENAI_API_KEY") == 1 and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_cli_names_the_extra_when_litellm_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)  # what an install without the extra sees
    argv = ["eval", str(cases_file(tmp_path)), "--out", str(tmp_path / "r.jsonl")]
    assert main([*argv, "--evaluator", "judge:openai/gpt-4o-mini"]) == 2
    assert INSTALL in capsys.readouterr().err


def test_a_span_judged_without_litellm_names_the_extra(
    spans: Spans, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)
    spans.reconfigure(evaluators=[LLMJudge("openai/gpt-4o-mini")], max_retries=2)

    @tracefact.llm
    def answer(question: str, contexts: list[str]) -> str:
        return "It opened in 1889."

    answer("q", ["The tower opened in 1889."])
    (span,) = spans.all()
    assert span.attributes["tracefact.eval.status"] == "error"
    assert INSTALL in str(span.attributes["tracefact.eval.error"])


def test_instrument_litellm_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[litellm\]'"):
        tracefact.instrument_litellm()


def test_a_missing_key_is_said_once_as_the_pipeline_starts_without_litellm_in_configure(
    tmp_path: Path,
) -> None:
    """The pipeline's thread imports litellm, not configure()'s.

    The warning names the variable, and tracefact's own hint is not scrubbed.
    """
    script = tmp_path / "app.py"
    script.write_text(
        "import sys, threading\n"
        "class Spy:\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'litellm':\n"
        "            print('litellm imported on', threading.current_thread().name)\n"
        "sys.meta_path.insert(0, Spy())\n"
        "import tracefact\n"
        "from tracefact.evaluators.judges import LLMJudge\n"
        "tracefact.configure(exporter='none', evaluators=[LLMJudge('openai/gpt-4o-mini')])\n"
        "for thread in threading.enumerate():\n"
        "    if thread.name == 'tracefact-credentials':\n"
        "        thread.join()\n"
        "tracefact.shutdown()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["litellm imported on tracefact-credentials"]
    assert done.stderr.count("OPENAI_API_KEY") == 1, done.stderr
    assert "(or pass api_key=...)" in done.stderr and "SCRUBBED" not in done.stderr


def test_the_span_error_keeps_tracefacts_own_hint(
    spans: Spans, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    spans.reconfigure(evaluators=[LLMJudge("openai/gpt-4o-mini")], scrubbing=True)

    @tracefact.llm
    def answer(question: str, contexts: list[str]) -> str:
        return "It opened in 1889."

    answer("q", ["The tower opened in 1889."])
    (span,) = spans.all()
    error = str(span.attributes["tracefact.eval.error"])
    assert error.endswith("set OPENAI_API_KEY (or pass api_key=...)"), error


@pytest.mark.parametrize("model", ["my-proxy-model", "openai/my-proxy-model"])
def test_a_proxy_model_prints_no_litellm_banner(
    model: str,
    openai_server: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The self-hosted and proxy case `--api-base` is for: names litellm does not list."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    argv = ["eval", str(cases_file(tmp_path)), "--out", str(tmp_path / "r.jsonl")]
    main([*argv, "--evaluator", f"judge:{model}", "--api-base", openai_server.api_base])
    judge = LLMJudge(model, api_base=openai_server.api_base)
    if "/" in model:
        assert asyncio.run(judge.evaluate(CASE)).label == "factual"
    else:  # a name with no provider fails, saying how to name one
        with pytest.raises(ProviderError, match=f"e.g. openai/{model} for an OpenAI"):
            asyncio.run(judge.evaluate(CASE))
    printed = capfd.readouterr()
    assert "Provider List" not in printed.out + printed.err
