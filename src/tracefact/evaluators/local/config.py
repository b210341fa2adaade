"""The shipped model's parameters (``config.json`` beside the weights)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tracefact.evaluators.local.alignment import FEATURES

SHAPE_FEATURES = ("log_sentences", "question", "log_question_words")
"""Names of an answer's shape terms, in the order of `case_terms`."""
CASE_FEATURES = ("worst_sentence", *SHAPE_FEATURES, "off_topic")
"""Names of the per-answer calibration inputs: the worst sentence's logit, the shape, and
how far the contexts are from being about the question and the answer at all."""
OFF_TOPIC_OVERLAP = 0.1
"""Below this share of the question's (or the answer's) words found in the contexts, the
contexts are read as being about something else (`case_terms`)."""


def case_terms(sentences: int, question: str, topic_overlap: float) -> tuple[float, ...]:
    """An answer's calibration inputs after its worst sentence (`CASE_FEATURES`).

    Its shape, one value per case whichever sentence is worst, and ``off_topic``: 0 while
    at least `OFF_TOPIC_OVERLAP` of the question's or the answer's words are in the
    contexts (`alignment.topic_overlap`), rising to 1 where none are. Retrieval that
    brought back another subject leaves every sentence of the answer unsupported, yet a
    short answer to a question reads as supported to the per-sentence checks and model.
    """
    words = len(question.split())
    off_topic = max(0.0, 1.0 - topic_overlap / OFF_TOPIC_OVERLAP)
    return (math.log(max(1, sentences)), float(words > 0), math.log1p(words), off_topic)


@dataclass(frozen=True)
class ModelConfig:
    """The parameters shipped in ``config.json`` beside the model."""

    max_length: int = 256
    max_question_tokens: int = 24
    max_previous_tokens: int = 24
    max_sentence_tokens: int = 64
    weights: tuple[float, ...] = (1.0,) + (0.0,) * (len(FEATURES) - 1)
    """Per-sentence combiner over `alignment.FEATURES` (a logistic regression), fitted by
    ``scripts/fit_local_factuality_combiner.py``."""
    bias: float = 0.0
    calibration: tuple[float, ...] = (1.0,) + (0.0,) * len(CASE_FEATURES)
    """Platt scaling of the answer's worst sentence into a probability of hallucination:
    a weight per `CASE_FEATURES` entry, then the intercept. Besides the worst sentence's
    combined logit it weighs the case's shape, which shifts how high the worst of its
    sentence scores runs by chance alone: how many sentences were judged, and whether
    (and how long) a question was asked (a summary of one long document, with no
    question, has no question words to anchor its sentences), and whether the contexts
    are about the question or the answer at all (``off_topic``)."""
    threshold: float = 0.5
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
        if "calibration" in values:
            calibration = tuple(float(v) for v in values["calibration"])
            if len(calibration) != len(CASE_FEATURES) + 1:
                raise ValueError(
                    f"calibration has {len(calibration)} values, not {len(CASE_FEATURES) + 1} "
                    f"(a weight per {CASE_FEATURES} and the intercept)"
                )
            values["calibration"] = calibration
        return cls(**values)
