"""VectaraHHEM against a real local server implementing Vectara's contract."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.fakes.vectara_server import API_KEY, FakeVectara, Scripted, fake_vectara
from tracefact._retry import Backoff
from tracefact.evaluators import (
    BadReplyError,
    EvalCase,
    EvaluationTimeout,
    Evaluator,
    InvalidCaseError,
    ProviderError,
    RateLimitError,
)
from tracefact.evaluators.vectara import VectaraHHEM
from tracefact.pipeline.retry import RetryPolicy, run_evaluator

CASE = EvalCase(
    input="When was the tower completed?",
    contexts=["The Eiffel Tower was completed in 1889.", "It is in Paris."],
    output="The Eiffel Tower was completed in 1889.",
)


@pytest.fixture
def server() -> Iterator[FakeVectara]:
    with fake_vectara() as fake:
        yield fake


@pytest.fixture
async def hhem(server: FakeVectara) -> AsyncIterator[VectaraHHEM]:
    async with VectaraHHEM(api_key=API_KEY, base_url=server.base_url) as e:
        yield e


async def test_consistent_answer_scores_low_and_keeps_native_figures(
    hhem: VectaraHHEM, server: FakeVectara
) -> None:
    result = await hhem.evaluate(CASE)
    assert (result.label, result.score) == ("factual", 0.0)
    assert result.raw["score"] == 1.0
    assert result.raw["p_consistent"] == 1.0 and result.raw["p_inconsistent"] == 0.0
    headers, body = server.requests[0]
    assert headers["x-api-key"] == API_KEY
    assert body == {
        "generated_text": CASE.output,
        "source_texts": CASE.contexts,
        "language": "eng",
        "model_parameters": {"model_name": "hhem_v2.2"},
    }


async def test_invented_answer_is_hallucinated(hhem: VectaraHHEM) -> None:
    case = CASE.model_copy(update={"output": "Gustave Eiffel designed it for Napoleon in Rome."})
    result = await hhem.evaluate(case)
    assert result.label == "hallucinated"
    assert result.score == pytest.approx(1.0 - result.raw["score"])
    assert result.score > 0.5
    assert "consistency" in result.explanation


def test_key_comes_from_argument_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VECTARA_API_KEY", raising=False)
    with pytest.raises(ValueError, match="VECTARA_API_KEY"):
        VectaraHHEM()
    monkeypatch.setenv("VECTARA_API_KEY", "from-env")
    evaluator = VectaraHHEM(language="fra")
    assert isinstance(evaluator, Evaluator)
    assert "from-env" not in str(evaluator.describe())
    for bad in ("en", "ENG", "english"):
        with pytest.raises(ValueError, match="ISO 639-3"):
            VectaraHHEM(language=bad)


async def test_bad_key_is_a_clear_permanent_error(server: FakeVectara) -> None:
    evaluator = VectaraHHEM(api_key="wrong", base_url=server.base_url)
    with pytest.raises(ProviderError, match="VECTARA_API_KEY") as caught:
        await evaluator.evaluate(CASE)
    assert (caught.value.status_code, caught.value.transient) == (403, False)
    assert len(server.requests) == 1


async def test_unsupported_language_names_the_language(server: FakeVectara) -> None:
    evaluator = VectaraHHEM(api_key=API_KEY, language="xho", base_url=server.base_url)
    with pytest.raises(ProviderError, match="'xho'") as caught:
        await evaluator.evaluate(CASE)
    assert (caught.value.status_code, caught.value.transient) == (422, False)


async def test_malformed_request_is_400(hhem: VectaraHHEM, server: FakeVectara) -> None:
    server.script = [Scripted(status=400, body={"field_errors": {"source_texts": "empty"}})]
    with pytest.raises(ProviderError, match="malformed") as caught:
        await hhem.evaluate(CASE)
    assert caught.value.status_code == 400 and not caught.value.transient


async def test_rate_limit_is_raised_with_its_retry_after(
    hhem: VectaraHHEM, server: FakeVectara
) -> None:
    server.script = [Scripted(status=429, headers={"Retry-After": "0.3"})]
    with pytest.raises(RateLimitError) as caught:
        await hhem.evaluate(CASE)
    assert caught.value.transient and caught.value.retry_after == 0.3
    assert len(server.requests) == 1  # one layer of retries: the caller's


async def test_the_pipeline_retries_a_rate_limit_after_retry_after(
    hhem: VectaraHHEM, server: FakeVectara
) -> None:
    server.script = [Scripted(status=429, headers={"Retry-After": "0.3"})]
    started = time.perf_counter()
    outcome = await run_evaluator(hhem, CASE, RetryPolicy(max_retries=2))
    assert time.perf_counter() - started >= 0.3
    assert outcome.status == "ok" and outcome.result is not None
    assert outcome.result.label == "factual"
    assert len(server.requests) == 2


async def test_server_errors_are_transient_and_retried_by_the_pipeline(
    hhem: VectaraHHEM, server: FakeVectara
) -> None:
    server.script = [Scripted(status=503)]
    with pytest.raises(ProviderError) as caught:
        await hhem.evaluate(CASE)
    assert (caught.value.status_code, caught.value.transient) == (503, True)
    server.script = [Scripted(status=503), Scripted(status=500)]
    fast = RetryPolicy(max_retries=2, backoff=Backoff(0.01, 0.05))
    outcome = await run_evaluator(hhem, CASE, fast)
    assert outcome.status == "ok"
    assert len(server.requests) == 4  # one above, then one try and two retries
    server.script = [Scripted(status=502)] * 3
    outcome = await run_evaluator(hhem, CASE, fast)
    assert outcome.status == "error" and "502" in (outcome.error or "")
    assert len(server.requests) == 7  # never more than max_retries + 1 per evaluation


async def test_slow_reply_is_a_timeout(server: FakeVectara) -> None:
    server.script = [Scripted(delay=5.0)]
    evaluator = VectaraHHEM(api_key=API_KEY, base_url=server.base_url, timeout=0.2)
    with pytest.raises(EvaluationTimeout):
        await evaluator.evaluate(CASE)
    await evaluator.aclose()


async def test_unreachable_server_is_transient() -> None:
    evaluator = VectaraHHEM(api_key=API_KEY, base_url="http://127.0.0.1:9")
    with pytest.raises(ProviderError) as caught:
        await evaluator.evaluate(CASE)
    assert caught.value.transient and caught.value.status_code is None


async def test_reply_without_score_is_a_bad_reply(hhem: VectaraHHEM, server: FakeVectara) -> None:
    server.script = [Scripted(status=200, body={"p_consistent": 0.9})]
    with pytest.raises(BadReplyError):
        await hhem.evaluate(CASE)


async def test_no_contexts_is_an_invalid_case(hhem: VectaraHHEM, server: FakeVectara) -> None:
    with pytest.raises(InvalidCaseError):
        await hhem.evaluate(EvalCase(output="anything"))
    assert server.requests == []
