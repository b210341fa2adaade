"""The Prometheus rules compute what the estimator computes.

collector/prometheus/tests/tracefact-rules.test.yml (run by `make test-prometheus`)
checks the recorded bounds within brackets; here the estimator, given the same sums as
that file's input series, must land inside each bracket, so PromQL and Python agree.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tracefact.monitor import Totals, interval

RULE_TESTS = Path(__file__).parents[2] / "collector" / "prometheus" / "tests"
BRACKET = re.compile(r"\(tracefact:monitor_rate_(lower|upper):10m > ([\d.]+) < ([\d.]+)\)")
COUNTERS = {
    "tracefact_monitor_weight_total": "weight",
    "tracefact_monitor_hallucinated_weight_total": "hallucinated_weight",
    "tracefact_monitor_weight_squared_total": "weight_squared",
    "tracefact_monitor_hallucinated_weight_squared_total": "hallucinated_weight_squared",
}


def expand(values: str) -> list[float]:
    """The series notation of promtool ('0+2x29 60+20x29') as one value per step."""
    expanded: list[float] = []
    for token in values.split():
        start, _, rest = token.partition("+")
        step, _, times = rest.partition("x")
        count = int(times) if times else 0
        expanded.extend(float(start) + i * float(step or 0) for i in range(count + 1))
    return expanded


def window_sums(test: dict[str, Any], minute: int) -> dict[tuple[str, ...], Totals]:
    """Σ over the 10 minutes before `minute` of every counter, per series (no instance)."""
    sums: dict[tuple[str, ...], Totals] = {}
    for series in test["input_series"]:
        name, _, labels = series["series"].partition("{")
        if name not in COUNTERS:
            continue
        key = tuple(
            sorted(p for p in labels.rstrip("}").split(",") if not p.startswith("instance"))
        )
        values = expand(series["values"])
        totals = sums.setdefault(key, Totals(judged=1))
        field = COUNTERS[name]
        setattr(totals, field, getattr(totals, field) + values[minute] - values[minute - 10])
    return sums


def brackets() -> list[tuple[str, dict[str, Any], int, str, float, float]]:
    found = []
    for path in sorted(RULE_TESTS.glob("*.yml")):
        for test in yaml.safe_load(path.read_text())["tests"]:
            for case in test.get("promql_expr_test", []):
                match = BRACKET.search(case["expr"])
                if match:
                    minute = int(case["eval_time"].rstrip("m"))
                    bound, low, high = match.group(1), float(match.group(2)), float(match.group(3))
                    found.append((path.name, test, minute, bound, low, high))
    return found


def test_there_are_brackets_to_check() -> None:
    assert {bound for *_, bound, _, _ in brackets()} == {"lower", "upper"}


@pytest.mark.parametrize(("name", "test", "minute", "bound", "low", "high"), brackets())
def test_the_estimator_lands_in_each_promtool_bracket(
    name: str, test: dict[str, Any], minute: int, bound: str, low: float, high: float
) -> None:
    for totals in window_sums(test, minute).values():
        value = getattr(interval(totals), bound)
        assert low < value < high, (name, minute, bound, value)
