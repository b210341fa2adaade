"""Property: the sliding window holds exactly the observations of its buckets."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracefact.monitor import Observation, RateEstimator, estimate_all

observations = st.lists(
    st.builds(
        Observation,
        evaluator=st.sampled_from(["judge", "local"]),
        group=st.tuples(st.sampled_from(["a", "b", "c"])),
        weight=st.sampled_from([1.0, 2.0, 10.0, 100.0]),
        status=st.sampled_from(["ok", "ok", "ok", "dropped", "timeout"]),
        hallucinated=st.booleans(),
        time=st.floats(min_value=0, max_value=200, allow_nan=False),
    ),
    max_size=60,
)


@settings(max_examples=100, deadline=None)
@given(observations)
def test_window_estimates_equal_estimates_over_the_window(seen: list[Observation]) -> None:
    seen = sorted(seen, key=lambda o: o.time)  # live traffic arrives in time order
    estimator = RateEstimator(group_by=("g",), window_seconds=60, bucket_seconds=10)
    for observation in seen:
        estimator.add(observation)
    now = seen[-1].time if seen else 0.0
    end = math.floor(now / 10)
    inside = [o for o in seen if end - 6 < math.floor(o.time / 10) <= end]
    got = estimator.estimates(now=now)
    want = estimate_all(inside, group_by=("g",))
    assert [(e.evaluator, dict(e.group)) for e in got] == [
        (e.evaluator, dict(e.group)) for e in want
    ]
    for mine, theirs in zip(got, want, strict=True):
        assert mine.totals.judged == theirs.totals.judged
        assert mine.totals.unjudged == theirs.totals.unjudged
        assert mine.totals.weight == pytest.approx(theirs.totals.weight)
        assert mine.totals.hallucinated_weight_squared == pytest.approx(
            theirs.totals.hallucinated_weight_squared
        )
        assert (mine.lower, mine.upper) == pytest.approx((theirs.lower, theirs.upper))
