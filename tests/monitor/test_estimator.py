"""The estimator through its public API: spans' final attributes in, estimates out."""

from __future__ import annotations

import math

import pytest

from tracefact import semconv
from tracefact.monitor import Observation, RateEstimator, Totals, interval, wilson


def evaluated(
    label: str | None, rate: float, model: str = "m1", status: str = "ok"
) -> dict[str, object]:
    """A span's attributes as the pipeline exports them, with one evaluator `judge`."""
    attributes: dict[str, object] = {
        semconv.EVAL_STATUS: status,
        semconv.EVAL_SAMPLE_RATE: rate,
        semconv.LLM_MODEL_NAME: model,
    }
    if label is not None:
        attributes[semconv.eval_attribute("judge", "status")] = "ok"
        attributes[semconv.eval_attribute("judge", "label")] = label
    return attributes


def test_equal_weights_give_wilsons_interval() -> None:
    estimator = RateEstimator(group_by=("model",), clock=lambda: 1000.0)
    for i in range(40):
        estimator.add_span(evaluated("hallucinated" if i < 10 else "factual", 0.5))
    (estimate,) = estimator.estimates()
    assert estimate.evaluator == "judge"
    assert estimate.group == {"model": "m1"}
    assert estimate.rate == pytest.approx(0.25)
    assert (estimate.lower, estimate.upper) == pytest.approx(wilson(0.25, 40, 1.959963984540054))
    assert estimate.n_eff == pytest.approx(40)
    assert estimate.totals.weight == pytest.approx(80)  # 40 spans at 50% stand for 80


def test_wilson_matches_a_published_value() -> None:
    # Wilson (1927) / Newcombe (1998) table: 81 of 263, 95% -> 0.2553 .. 0.3662
    lower, upper = wilson(81 / 263, 263, 1.959963984540054)
    assert (round(lower, 4), round(upper, 4)) == (0.2553, 0.3662)


def test_mixed_weights_reweight_the_rate() -> None:
    """A route judged fully with many hallucinations does not swamp the 1% rest."""
    estimator = RateEstimator(group_by=(), clock=lambda: 0.0)
    for i in range(100):  # risky: every span judged, 30% hallucinated
        estimator.add_span(evaluated("hallucinated" if i < 30 else "factual", 1.0))
    for i in range(100):  # the rest: 1% judged, 2% hallucinated
        estimator.add_span(evaluated("hallucinated" if i < 2 else "factual", 0.01))
    (estimate,) = estimator.estimates()
    truth = (30 + 2 * 100) / (100 + 100 * 100)
    assert estimate.rate == pytest.approx(truth)
    assert estimate.lower < truth < estimate.upper
    assert estimate.n_eff == pytest.approx((100 + 100 * 100) ** 2 / (100 + 100 * 100**2))


def test_unjudged_spans_are_coverage_not_rate() -> None:
    estimator = RateEstimator(group_by=(), evaluators=["judge"], clock=lambda: 0.0)
    for _ in range(3):
        estimator.add_span(evaluated("hallucinated", 1.0))
    estimator.add_span(evaluated(None, 1.0, status=semconv.STATUS_DROPPED))
    failed = evaluated(None, 1.0, status=semconv.STATUS_ERROR)
    failed[semconv.eval_attribute("judge", "status")] = semconv.STATUS_TIMEOUT
    estimator.add_span(failed)
    estimator.add_span(evaluated(None, 1.0, status=semconv.STATUS_SKIPPED))  # not sampled-unjudged
    (estimate,) = estimator.estimates()
    assert estimate.rate == 1.0
    assert estimate.totals.unjudged == {"dropped": 1, "timeout": 1}
    assert estimate.coverage == pytest.approx(3 / 5)


def test_the_window_slides_by_buckets() -> None:
    now = [0.0]
    estimator = RateEstimator(
        group_by=(), window_seconds=60, bucket_seconds=10, clock=lambda: now[0]
    )
    estimator.add_span(evaluated("hallucinated", 1.0))
    now[0] = 55.0
    estimator.add_span(evaluated("factual", 1.0))
    assert estimator.estimates()[0].rate == pytest.approx(0.5)
    now[0] = 61.0  # the first bucket [0, 10) has left the window
    assert estimator.estimates()[0].rate == 0.0
    now[0] = 200.0
    assert estimator.estimates() == []


def test_groups_past_the_bound_pool_into_other() -> None:
    estimator = RateEstimator(group_by=("model",), max_groups=2, clock=lambda: 0.0)
    for model in ("a", "b", "c", "d"):
        recorded = estimator.add_span(evaluated("factual", 1.0, model=model))
        assert len(recorded) == 1
    groups = [e.group["model"] for e in estimator.estimates()]
    assert groups == ["(other)", "a", "b"]
    other = next(e for e in estimator.estimates() if e.group["model"] == semconv.GROUP_OTHER)
    assert other.totals.judged == 2


def test_an_idle_group_gives_its_place_up() -> None:
    now = [0.0]
    estimator = RateEstimator(
        group_by=("model",),
        max_groups=1,
        window_seconds=10,
        bucket_seconds=10,
        clock=lambda: now[0],
    )
    estimator.add_span(evaluated("factual", 1.0, model="old"))
    now[0] = 100.0
    (recorded,) = estimator.add_span(evaluated("factual", 1.0, model="new"))
    assert recorded.group == ("new",)


def test_group_aliases_read_span_then_resource() -> None:
    estimator = RateEstimator(group_by=("service", "model", "route"), clock=lambda: 0.0)
    attributes = evaluated("factual", 1.0)
    del attributes[semconv.LLM_MODEL_NAME]
    attributes[semconv.GEN_AI_REQUEST_MODEL] = "gpt"
    (recorded,) = estimator.add_span(attributes, {"service.name": "bot"})
    assert estimator.labels(recorded.group) == {"service": "bot", "model": "gpt", "route": "(none)"}


def test_spans_without_a_usable_sample_rate_are_not_counted() -> None:
    estimator = RateEstimator(clock=lambda: 0.0)
    for rate in (0.0, -1.0, math.nan, "0.5", None):
        attributes = evaluated("factual", 1.0)
        attributes[semconv.EVAL_SAMPLE_RATE] = rate
        assert estimator.add_span(attributes) == []
    assert estimator.add_span({semconv.EVAL_STATUS: semconv.STATUS_SAMPLED_OUT}) == []
    assert estimator.estimates() == []


def test_no_verdict_gives_the_widest_interval() -> None:
    empty = interval(Totals())
    assert (empty.rate, empty.lower, empty.upper) == (None, 0.0, 1.0)


def test_counts_add_like_single_observations() -> None:
    one, many = Totals(), Totals()
    observation = Observation("judge", (), 4.0, "ok", True, 0.0)
    for _ in range(3):
        one.add(observation)
    many.add(observation, count=3)
    assert one == many


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("max_groups", 0),
        ("window_seconds", 0),
        ("bucket_seconds", 600),
        ("group_by", "model"),
        ("group_by", ("evaluator",)),
        ("confidence", 1.0),
    ],
)
def test_bad_options_are_refused_by_name(argument: str, value: object) -> None:
    with pytest.raises((ValueError, TypeError), match=argument):
        RateEstimator(**{argument: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("weight", "time", "count"),
    [(0.0, 0.0, 1), (math.nan, 0.0, 1), (-2.0, 0.0, 1), (1.0, math.inf, 1), (1.0, 0.0, -1)],
)
def test_impossible_observations_are_refused(weight: float, time: float, count: int) -> None:
    estimator = RateEstimator(group_by=())
    with pytest.raises(ValueError, match=r"weight|time"):
        estimator.add(Observation("judge", (), weight, "ok", True, time), count=count)
    assert estimator.estimates(now=0.0) == []


def test_a_span_time_comes_from_the_caller_offline() -> None:
    estimator = RateEstimator(group_by=(), window_seconds=60, bucket_seconds=10)
    estimator.add_span(evaluated("hallucinated", 1.0), time=1_000.0)
    assert estimator.estimates(now=1_000.0)[0].rate == 1.0
    estimator.add_span(evaluated("factual", 1.0), time=1_100.0)
    (estimate,) = estimator.estimates(now=1_100.0)  # the first span is out of the window
    assert (estimate.totals.judged, estimate.rate) == (1, 0.0)


def test_a_span_failed_before_any_evaluator_is_known_is_still_counted() -> None:
    estimator = RateEstimator(group_by=(), clock=lambda: 0.0)
    estimator.add_span(evaluated(None, 0.5, status=semconv.STATUS_SHUTDOWN))
    (estimate,) = estimator.estimates()
    assert estimate.evaluator == semconv.EVALUATOR_UNKNOWN
    assert estimate.totals.unjudged == {"shutdown": 1}
    assert estimate.coverage == 0.0
