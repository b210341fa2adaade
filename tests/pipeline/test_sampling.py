"""Samplers: each alone, composed, and Ratio agreeing with OpenTelemetry's TraceIdRatioBased."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace.sampling import Decision as OtelDecision
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

from tracefact.sampling import (
    Always,
    Budget,
    Capacity,
    Decision,
    Never,
    RateLimit,
    Ratio,
    Rule,
    Sampler,
    SpanInfo,
)


def info(trace_id: int = 1, name: str = "llm", **attributes: object) -> SpanInfo:
    return SpanInfo(trace_id, name, attributes)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Counting(Sampler):
    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked = 0

    def decide(self, span: SpanInfo) -> Decision:
        self.asked += 1
        return Decision(self.answer, 0.5)


@given(
    trace_id=st.integers(min_value=1, max_value=2**128 - 1),
    rate=st.floats(min_value=0.0, max_value=1.0),
)
def test_ratio_agrees_with_trace_id_ratio_based(trace_id: int, rate: float) -> None:
    otel = TraceIdRatioBased(rate).should_sample(None, trace_id, "llm")
    ours = Ratio(rate).decide(info(trace_id))
    assert ours.sampled == (otel.decision == OtelDecision.RECORD_AND_SAMPLE)
    assert ours.rate == rate


def test_ratio_share_is_close_to_its_rate() -> None:
    ratio = Ratio(0.25)
    sampled = sum(ratio.decide(info(i * 0x9E3779B97F4A7C15 % 2**64)).sampled for i in range(4000))
    assert 800 < sampled < 1200


def test_ratio_rejects_out_of_range() -> None:
    for bad in (-0.1, 1.5):
        try:
            Ratio(bad)
        except ValueError as error:
            assert "within [0, 1]" in str(error)
        else:
            raise AssertionError("accepted")


def test_always_and_never() -> None:
    assert Always().decide(info()) == Decision(True, 1.0)
    assert Never().decide(info()) == Decision(False, 0.0)


def test_rate_limit_is_a_token_bucket() -> None:
    clock = FakeClock()
    limit = RateLimit(per_second=2, burst=3, clock=clock)
    assert [limit.decide(info()).sampled for _ in range(4)] == [True, True, True, False]
    clock.now += 0.5  # one token back
    assert [limit.decide(info()).sampled for _ in range(2)] == [True, False]
    clock.now += 10  # refills to the burst, not beyond
    assert [limit.decide(info()).sampled for _ in range(4)] == [True, True, True, False]


def test_rate_limit_reports_its_effective_rate() -> None:
    clock = FakeClock()
    limit = RateLimit(per_second=1, burst=1, clock=clock)
    decisions = [limit.decide(info()) for _ in range(4)]
    assert decisions[-1].rate == 0.25


def test_rate_limit_forgets_decisions_older_than_its_window() -> None:
    clock = FakeClock()
    limit = RateLimit(per_second=1, burst=1, clock=clock)
    assert [limit.decide(info()).rate for _ in range(4)] == [1.0, 0.5, 1 / 3, 0.25]
    clock.now += 61  # those four leave the window: the share is of this one alone
    assert limit.decide(info()).rate == 1.0
    clock.now += 0.5
    assert limit.decide(info()) == Decision(False, 0.5)


def test_capacity_passes_while_there_is_room_and_reports_its_pass_share() -> None:
    clock = FakeClock()
    room = [2]
    capacity = Capacity(lambda: room[0], clock=clock)
    first = capacity.decide(info())
    room[0] = 0
    refusals = [capacity.decide(info()) for _ in range(2)]
    room[0] = 1
    last = capacity.decide(info())
    assert (first, last) == (Decision(True, 1.0), Decision(True, 0.5))
    assert refusals == [Decision(False, 0.5), Decision(False, 1 / 3)]


def test_a_sampler_bounded_by_capacity_applies_both_rates() -> None:
    room = [0]
    bounded = Ratio(1.0) & Counting(True) & Capacity(lambda: room[0])
    assert not bounded.decide(info()).sampled
    room[0] = 1
    decision = bounded.decide(info())  # the left's 0.5, then one pass in two decisions
    assert (decision.sampled, decision.rate) == (True, 0.5 * 0.5)


def test_budget_stops_sampling_while_the_hour_is_spent() -> None:
    clock = FakeClock()
    budget = Budget(usd_per_hour=0.05, clock=clock)
    assert budget.decide(info()).sampled
    for _ in range(4):
        budget.record_cost(0.01)  # 0.04 spent, average 0.01: one more fits
    assert budget.decide(info()).sampled
    budget.record_cost(0.01)
    assert not budget.decide(info()).sampled  # 0.05 + 0.01 expected > 0.05
    clock.now += 3660  # the spend leaves the window (kept per minute)
    assert budget.decide(info()).sampled


def test_rule_by_name_pattern_attributes_and_predicate() -> None:
    by_name = Rule("checkout.*", then=Always())
    assert by_name.decide(info(name="checkout.answer")).sampled
    assert not by_name.decide(info(name="search")).sampled
    by_attributes = Rule({"llm.model_name": "gpt-4o"}, then=Always())
    assert by_attributes.decide(info(**{"llm.model_name": "gpt-4o"})).sampled
    assert not by_attributes.decide(info(**{"llm.model_name": "small"})).sampled
    by_predicate = Rule(lambda span: span.trace_id % 2 == 0, then=Always())
    assert [by_predicate.decide(info(t)).sampled for t in (2, 3)] == [True, False]


def test_and_asks_the_right_side_only_when_the_left_says_yes() -> None:
    right = Counting(True)
    assert not (Never() & right).decide(info()).sampled
    assert right.asked == 0
    decision = (Counting(True) & right).decide(info())
    assert decision == Decision(True, 0.25)
    assert right.asked == 1


def test_ratio_and_rate_limit_spends_tokens_only_on_ratio_hits() -> None:
    clock = FakeClock()
    limit = RateLimit(per_second=1, burst=1, clock=clock)
    combined = Ratio(0.0) & limit
    assert not combined.decide(info()).sampled
    assert limit.decide(info()).sampled  # the token is still there


def test_or_takes_the_first_yes() -> None:
    right = Counting(True)
    assert (Always() | right).decide(info()).sampled
    assert right.asked == 0
    decision = (Counting(False) | Counting(True)).decide(info())
    assert decision.sampled and decision.rate == 0.75
    assert not (Never() | Never()).decide(info()).sampled


def test_rules_compose_with_a_fallback_ratio() -> None:
    sampler = Rule("vip.*", then=Always()) | Ratio(0.0)
    assert sampler.decide(info(name="vip.answer")).sampled
    assert not sampler.decide(info(name="other")).sampled


def test_costs_reach_a_budget_inside_a_composition() -> None:
    clock = FakeClock()
    budget = Budget(usd_per_hour=0.01, clock=clock)
    sampler = Ratio(1.0) & budget
    sampler.record_cost(0.02)
    assert not sampler.decide(info()).sampled
