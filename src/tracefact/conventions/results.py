"""Reading tracefact's evaluation results back off an evaluated span's attributes.

The monitor reads them from spans as the pipeline exports them, and `tracefact report`
from a file of exported spans: one reader, so both count the same spans the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from tracefact import semconv

_PREFIX = "tracefact.eval."
_STATUS_SUFFIX = ".status"


@dataclass(frozen=True, slots=True)
class EvaluatorResult:
    """One evaluator's outcome on one span: its status, and its verdict when ok."""

    status: str
    label: str | None = None
    score: float | None = None
    explanation: str | None = None

    @property
    def hallucinated(self) -> bool | None:
        """The verdict as y (True: hallucinated); None when there is none."""
        if self.status != semconv.STATUS_OK or self.label is None:
            return None
        return self.label == "hallucinated"


@dataclass(frozen=True, slots=True)
class SpanResults:
    """What evaluation made of one span."""

    status: str
    """`tracefact.eval.status`."""
    sample_rate: float | None
    """The probability the span had of being evaluated; None when absent or invalid."""
    evaluators: Mapping[str, EvaluatorResult] = field(default_factory=dict)
    cost_usd: float | None = None

    @property
    def weight(self) -> float | None:
        """1 / sample rate: how many spans of the traffic this one stands for."""
        return None if self.sample_rate is None else 1.0 / self.sample_rate


def read_results(attributes: Mapping[str, object]) -> SpanResults | None:
    """The span's evaluation results, or None for a span without `tracefact.eval.status`."""
    status = attributes.get(semconv.EVAL_STATUS)
    if not isinstance(status, str):
        return None
    evaluators: dict[str, EvaluatorResult] = {}
    # A span has dozens of attributes and this runs per sampled span: a C-level filter
    # first, a function call only for the few `...status` keys.
    for key in [k for k in attributes if k.endswith(_STATUS_SUFFIX)]:
        name, value = _evaluator_of(key), attributes[key]
        if name is None or not isinstance(value, str):
            continue
        label = attributes.get(semconv.eval_attribute(name, "label"))
        explanation = attributes.get(semconv.eval_attribute(name, "explanation"))
        evaluators[name] = EvaluatorResult(
            status=value,
            label=label if isinstance(label, str) else None,
            score=_number(attributes.get(semconv.eval_attribute(name, "score"))),
            explanation=explanation if isinstance(explanation, str) else None,
        )
    rate = _number(attributes.get(semconv.EVAL_SAMPLE_RATE))
    return SpanResults(
        status=status,
        sample_rate=rate if rate is not None and 0.0 < rate <= 1.0 else None,
        evaluators=evaluators,
        cost_usd=_number(attributes.get(semconv.EVAL_COST_USD)),
    )


def _evaluator_of(key: str) -> str | None:
    """`name` for a key `tracefact.eval.<name>.status` (a name without dots)."""
    if not (key.startswith(_PREFIX) and key.endswith(_STATUS_SUFFIX)):
        return None
    name = key[len(_PREFIX) : -len(_STATUS_SUFFIX)]
    return name if name and "." not in name else None


def _number(value: object) -> float | None:
    """A finite float from an int or float attribute (bools are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None
