"""Live monitoring: the hallucination rate of all traffic from the evaluated sample.

`estimator` is pure (usable offline on a file of spans); `metrics` publishes it as
OpenTelemetry metrics; `live.RateMonitor` is the span observer the pipeline hands every
sampled span to.
"""

from tracefact.monitor.estimator import (
    Estimate,
    Group,
    Interval,
    Observation,
    RateEstimator,
    Totals,
    estimate_all,
    interval,
    wilson,
)

__all__ = [
    "Estimate",
    "Group",
    "Interval",
    "Observation",
    "RateEstimator",
    "Totals",
    "estimate_all",
    "interval",
    "wilson",
]
