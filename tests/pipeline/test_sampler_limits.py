"""Samplers' limits hold: memory per time bucket, and a budget with evaluations in flight."""

from __future__ import annotations

import gc
import os
import time
import tracemalloc

import pytest

from tests.pipeline.helpers import Pipeline, ScriptedEvaluator
from tracefact import semconv
from tracefact.sampling import Budget, Decision, RateLimit, Ratio, Sampler, SpanInfo


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def info() -> SpanInfo:
    return SpanInfo(1, "llm", {})


def retained_bytes(sampler: Sampler, clock: FakeClock, decisions: int) -> int:
    """Bytes still allocated after `decisions` more decisions a microsecond apart."""
    span = info()

    def decide(count: int) -> None:
        for _ in range(count):
            clock.now += 1e-6
            sampler.decide(span)

    tracemalloc.start()
    try:
        decide(1000)  # first allocations
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        decide(decisions)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("limit", ["rate", "budget"])
def test_sampler_memory_does_not_grow_with_decisions(limit: str) -> None:
    clock = FakeClock()
    sampler = RateLimit(1000, clock=clock) if limit == "rate" else Budget(1.0, clock=clock)
    assert retained_bytes(sampler, clock, 50_000) < 10_000  # was ~100 bytes a decision


def test_rate_limit_pass_rate_is_kept_over_the_last_minute() -> None:
    clock = FakeClock()
    limit = RateLimit(per_second=1, burst=1, clock=clock)
    assert [limit.decide(info()).sampled for _ in range(4)] == [True, False, False, False]
    clock.now += 120  # the first four left the window
    assert limit.decide(info()) == Decision(True, 1.0)


def test_budget_reserves_for_evaluations_in_flight() -> None:
    budget = Budget(usd_per_hour=0.03, expected_cost_usd=0.01, clock=FakeClock())
    admitted = [budget.decide(info()) for _ in range(5)]
    assert [d.sampled for d in admitted] == [True, True, True, False, False]
    budget.settle(admitted[0], None)  # ended without a cost: its reservation comes back
    assert budget.decide(info()).sampled
    assert not budget.decide(info()).sampled


def test_budget_without_an_expected_cost_admits_one_at_a_time() -> None:
    budget = Budget(usd_per_hour=1.0, clock=FakeClock())
    first = budget.decide(info())
    assert first.sampled and not budget.decide(info()).sampled
    budget.settle(first, 0.1)  # now the cost is known: 0.1 a span, 0.9 left
    assert sum(budget.decide(info()).sampled for _ in range(20)) == 9


def test_a_forked_child_does_not_inherit_evaluations_in_flight() -> None:
    budget = Budget(usd_per_hour=1.0, clock=FakeClock())
    assert budget.decide(info()).sampled  # in flight in the parent when it forks
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own budget admits again
        os.write(write, b"1" if budget.decide(info()).sampled else b"0")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1"


def test_a_refusal_inside_a_composition_returns_the_budget_reservation() -> None:
    budget = Budget(usd_per_hour=1.0, clock=FakeClock())
    assert not (budget & Ratio(0.0)).decide(info()).sampled
    assert budget.decide(info()).sampled  # the refused span holds no slot


def test_budget_holds_with_evaluations_in_flight() -> None:
    """200 spans 2 ms apart through a $0.001, 200 ms evaluator: spend stays within budget."""
    evaluator = ScriptedEvaluator(cost=0.001)
    with Pipeline([evaluator], sampler=Budget(usd_per_hour=0.01)) as pipeline:
        for _ in range(200):
            pipeline.llm_span(output="slow:0.2")
            time.sleep(0.002)
        assert pipeline.flush()
        spans = pipeline.exported()
    assert len(spans) == 200
    spent = sum(s.attributes.get(semconv.EVAL_COST_USD, 0.0) for s in spans)
    assert evaluator.calls > 0 and spent <= 0.01 + 1e-9
    assert spent == pytest.approx(evaluator.calls * 0.001)
