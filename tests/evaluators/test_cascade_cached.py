"""Cascade and Cached, with small scripted evaluators."""

from __future__ import annotations

import asyncio

import pytest

import tracefact
from tests.conftest import Spans
from tracefact.evaluators import (
    BadReplyError,
    CredentialsError,
    EvalCase,
    EvalResult,
    EvaluationError,
    Evaluator,
    EvaluatorDescription,
    InvalidCaseError,
    ProviderError,
    RateLimitError,
)
from tracefact.evaluators.cached import Cached
from tracefact.evaluators.cascade import Cascade

CASE = EvalCase(input="q", contexts=["c"], output="a")


class Scripted:
    """Returns a fixed score (or raises), counting calls; optionally slow."""

    def __init__(
        self,
        score: float,
        cost: float | None = 0.0,
        tag: str = "fake",
        delay: float = 0.0,
        error: Exception | None = None,
    ) -> None:
        self.name = "hallucination"
        self.score = score
        self.cost = cost
        self.tag = tag
        self.delay = delay
        self.error = error
        self.calls = 0

    def describe(self) -> EvaluatorDescription:
        return EvaluatorDescription(
            name=self.name, evaluator=self.tag, settings={"score": self.score}
        )

    async def evaluate(self, case: EvalCase) -> EvalResult:
        self.calls += 1
        await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return EvalResult(
            name=self.name,
            label="hallucinated" if self.score > 0.5 else "factual",
            score=self.score,
            evaluator=self.tag,
            cost_usd=self.cost,
            raw={"from": self.tag},
        )


# --- Cascade --------------------------------------------------------------------------


async def test_confident_first_result_stands() -> None:
    first, then = Scripted(0.05, tag="cheap"), Scripted(0.9, cost=0.01, tag="judge")
    cascade = Cascade(first, then, escalate=(0.2, 0.8))
    assert isinstance(cascade, Evaluator)
    result = await cascade.evaluate(CASE)
    assert (result.score, result.evaluator) == (0.05, "cheap")
    assert result.raw["cascade"] == {"ran": ["cheap"], "escalated": False}
    assert then.calls == 0


@pytest.mark.parametrize("first_score", [0.2, 0.5, 0.8])
async def test_uncertain_band_escalates_and_sums_cost(first_score: float) -> None:
    first, then = Scripted(first_score, cost=0.001, tag="cheap"), Scripted(1.0, 0.01, "judge")
    result = await Cascade(first, then, escalate=(0.2, 0.8)).evaluate(CASE)
    assert (result.score, result.label) == (1.0, "hallucinated")
    assert result.cost_usd == pytest.approx(0.011)
    assert result.raw["cascade"]["ran"] == ["cheap", "judge"]
    assert result.raw["cascade"]["first"]["score"] == first_score
    assert result.raw["from"] == "judge"
    assert result.evaluator == "cascade(cheap -> judge)"


async def test_flagged_cases_escalate_unless_disabled() -> None:
    first, then = Scripted(0.95, cost=None, tag="cheap"), Scripted(0.0, cost=None, tag="judge")
    result = await Cascade(first, then, escalate=(0.2, 0.8)).evaluate(CASE)
    assert result.label == "factual" and then.calls == 1
    assert result.cost_usd is None  # nobody knew the price
    kept = await Cascade(first, then, escalate=(0.2, 0.8), escalate_flagged=False).evaluate(CASE)
    assert kept.label == "hallucinated" and then.calls == 1


async def test_predicate_decides_escalation() -> None:
    first, then = Scripted(0.0, tag="cheap"), Scripted(1.0, tag="judge")
    cascade = Cascade(first, then, escalate=lambda r: r.raw["from"] == "cheap", name="grounded")
    result = await cascade.evaluate(CASE)
    assert (result.name, result.evaluator) == ("grounded", "cascade(cheap -> judge)")
    assert cascade.describe().settings["first"]["evaluator"] == "cheap"
    with pytest.raises(ValueError, match="band"):
        Cascade(first, then, escalate=(0.9, 0.1))


async def test_a_first_evaluator_that_cannot_judge_the_case_hands_it_on() -> None:
    too_big = InvalidCaseError("answer and contexts are over max_case_chars")
    first, then = Scripted(0.0, tag="cheap", error=too_big), Scripted(0.9, 0.01, "judge")
    result = await Cascade(first, then).evaluate(CASE)
    assert (result.label, result.evaluator) == ("hallucinated", "cascade(cheap -> judge)")
    assert result.raw["cascade"]["first"] == {"error": f"InvalidCaseError: {too_big}"}
    assert result.cost_usd == pytest.approx(0.01)

    garbled = BadReplyError("no verdict in the reply", cost_usd=0.002)
    paid = await Cascade(Scripted(0.0, error=garbled), then).evaluate(CASE)
    assert paid.cost_usd == pytest.approx(0.012)  # the failed reply was paid for too


async def test_a_transient_first_failure_is_raised_for_the_retry_policy() -> None:
    busy = ProviderError("503 from the provider", status_code=503, transient=True)
    first, then = Scripted(0.0, error=busy), Scripted(0.9, tag="judge")
    with pytest.raises(ProviderError):
        await Cascade(first, then).evaluate(CASE)
    assert then.calls == 0


async def test_a_permanent_escalation_failure_keeps_the_first_result() -> None:
    no_key = CredentialsError("no API key for openai/gpt-4o-mini: set OPENAI_API_KEY")
    first = Scripted(0.5, cost=0.001, tag="cheap")
    then = Scripted(0.9, tag="judge", error=no_key)
    result = await Cascade(first, then).evaluate(CASE)
    assert (result.score, result.evaluator, result.cost_usd) == (0.5, "cheap", 0.001)
    assert result.raw["cascade"] == {
        "ran": ["cheap"],
        "escalated": False,
        "escalation_error": f"CredentialsError: {no_key}",
    }


async def test_a_transient_escalation_failure_is_raised_carrying_the_first_result() -> None:
    limited = RateLimitError("429 from the judge")
    first, then = Scripted(0.5, tag="cheap"), Scripted(0.9, tag="judge", error=limited)
    with pytest.raises(EvaluationError) as raised:
        await Cascade(first, then).evaluate(CASE)
    assert raised.value.transient
    fallback = raised.value.fallback
    assert fallback is not None and (fallback.score, fallback.evaluator) == (0.5, "cheap")
    assert fallback.raw["cascade"]["escalation_error"] == "RateLimitError: 429 from the judge"


async def test_the_pipeline_retries_the_cascade_then_exports_the_kept_result(
    spans: Spans,
) -> None:
    flaky_judge = Scripted(0.9, tag="judge", error=RateLimitError("429 from the judge"))
    first = Scripted(0.5, tag="cheap")
    spans.reconfigure(evaluators=[Cascade(first, flaky_judge)], max_retries=2)

    @tracefact.llm
    def answer(question: str, contexts: list[str]) -> str:
        return "a"

    answer("q", ["c"])
    (span,) = spans.all()
    attributes = span.attributes or {}
    assert flaky_judge.calls == 3  # the first try and two retries of the whole cascade
    assert attributes["tracefact.eval.status"] == "ok"
    assert attributes["tracefact.eval.hallucination.score"] == 0.5
    assert attributes["tracefact.eval.hallucination.evaluator"] == "cheap"
    assert "429 from the judge" in str(attributes["tracefact.eval.hallucination.escalation_error"])


# --- Cached ---------------------------------------------------------------------------


async def test_repeated_case_is_served_from_cache() -> None:
    inner = Scripted(0.9, cost=0.02)
    cached = Cached(inner)
    assert isinstance(cached, Evaluator)
    first = await cached.evaluate(CASE)
    again = await cached.evaluate(CASE.model_copy(update={"metadata": {"span": "other"}}))
    assert inner.calls == 1
    assert (first.cost_usd, again.cost_usd) == (0.02, 0.0)
    assert again.raw["cache"] == "hit" and "cache" not in first.raw
    assert again.score == first.score
    await cached.evaluate(CASE.model_copy(update={"output": "b"}))
    assert inner.calls == 2


async def test_evaluator_configuration_is_part_of_the_key() -> None:
    assert Cached(Scripted(0.1)).key(CASE) != Cached(Scripted(0.2)).key(CASE)
    assert Cached(Scripted(0.1)).key(CASE) == Cached(Scripted(0.1)).key(CASE)
    swapped = CASE.model_copy(update={"input": "c", "contexts": ["q"]})
    assert Cached(Scripted(0.1)).key(CASE) != Cached(Scripted(0.1)).key(swapped)


async def test_least_recently_used_entry_is_evicted() -> None:
    inner = Scripted(0.1)
    cached = Cached(inner, maxsize=2)
    a, b, c = (CASE.model_copy(update={"output": o}) for o in "abc")
    for case in (a, b, a, c):  # c evicts b, the least recently used
        await cached.evaluate(case)
    assert len(cached) == 2 and inner.calls == 3
    await cached.evaluate(a)
    assert inner.calls == 3
    await cached.evaluate(b)
    assert inner.calls == 4


async def test_entries_expire_after_ttl() -> None:
    inner = Scripted(0.1)
    cached = Cached(inner, ttl=0.05)
    await cached.evaluate(CASE)
    await cached.evaluate(CASE)
    assert inner.calls == 1
    await asyncio.sleep(0.08)
    await cached.evaluate(CASE)
    assert inner.calls == 2


async def test_concurrent_identical_requests_share_one_evaluation() -> None:
    inner = Scripted(0.7, cost=0.05, delay=0.05)
    cached = Cached(inner)
    results = await asyncio.gather(*(cached.evaluate(CASE) for _ in range(10)))
    assert inner.calls == 1
    assert sorted(r.cost_usd or 0.0 for r in results) == [0.0] * 9 + [0.05]
    assert {r.score for r in results} == {0.7}


async def test_errors_are_shared_in_flight_but_not_cached() -> None:
    inner = Scripted(0.7, delay=0.02, error=ProviderError("down", 503, transient=True))
    cached = Cached(inner)
    outcomes = await asyncio.gather(
        *(cached.evaluate(CASE) for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(o, ProviderError) for o in outcomes) and inner.calls == 1
    inner.error = None
    assert (await cached.evaluate(CASE)).score == 0.7 and inner.calls == 2


async def test_a_cancelled_waiter_does_not_cancel_the_others() -> None:
    inner = Scripted(0.3, delay=0.05)
    cached = Cached(inner)
    impatient = asyncio.ensure_future(cached.evaluate(CASE))
    patient = asyncio.ensure_future(cached.evaluate(CASE))
    await asyncio.sleep(0.01)
    impatient.cancel()
    assert (await patient).score == 0.3
    assert inner.calls == 1
