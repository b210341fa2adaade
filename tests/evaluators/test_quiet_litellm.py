"""litellm's background logging task never outlives the event loops tracefact runs it on."""

from __future__ import annotations

import asyncio
import gc
import sys
from typing import Any

import pytest

from tests.fakes.openai_server import MODEL, FakeOpenAI
from tracefact._imports import stop_litellm_worker
from tracefact.evaluators import EvalCase
from tracefact.evaluators.judges import LLMJudge

pytest.importorskip("litellm")

CASE = EvalCase(input="q", contexts=["It opened in 1889."], output="It opened in 1889.")


def test_loops_that_ran_a_judge_close_without_tracebacks_or_warnings(
    openai_server: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    unraisable: list[Any] = []

    async def judge_once() -> None:
        await LLMJudge(MODEL, **openai_server.options()).evaluate(CASE)
        await stop_litellm_worker()

    with monkeypatch.context() as patched:
        patched.setattr(sys, "unraisablehook", unraisable.append)
        for _ in range(2):  # like two `tracefact eval` runs in one process
            asyncio.run(judge_once())
        gc.collect()
    assert unraisable == []
    printed = capfd.readouterr()
    assert printed.err == "" and printed.out == ""
    assert [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")] == []
    assert len(openai_server.requests) == 2
