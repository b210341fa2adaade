"""The shipped model's parameters (``config.json`` beside the weights)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracefact.evaluators.local.alignment import FEATURES


@dataclass(frozen=True)
class ModelConfig:
    """The parameters shipped in ``config.json`` beside the model."""

    max_length: int = 384
    max_question_tokens: int = 48
    max_answer_tokens: int = 160
    window_slack: float = 0.15
    mean_weight: float = 1.0
    max_weight: float = 1.0
    weights: tuple[float, ...] = (1.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    """Per-sentence combiner over `alignment.FEATURES`, fitted by
    ``scripts/fit_local_factuality_combiner.py``."""
    bias: float = 0.0
    threshold: float = 0.5
    copied_share: float = 1.0
    copied_score: float = 1.0
    """A sentence at least ``copied_share`` copied from one context sentence
    (`alignment.copied_shares`) scores at most ``copied_score``."""
    version: str = "dev"
    cls_id: int = 101
    sep_id: int = 102
    pad_id: int = 0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        fitted_for = tuple(data.get("features", FEATURES))
        if fitted_for != FEATURES:
            raise ValueError(f"the model's combiner was fitted on {fitted_for}, not {FEATURES}")
        known = set(cls.__dataclass_fields__)
        values = {key: value for key, value in data.items() if key in known}
        if "weights" in values:
            values["weights"] = tuple(float(w) for w in values["weights"])
        return cls(**values)
