"""`LocalFactuality`: an embedded, offline hallucination detector (int8 ONNX cross-encoder).

The shipped model (``tracefact/models/local_factuality``) is a 4-layer MiniLM cross-encoder
fine-tuned on HaluEval plus context-dependent augmentations (swapped contexts, swapped
entities and numbers, negations, added unsupported sentences). It reads
``[CLS] question [SEP] answer sentences [SEP] context window [SEP]`` and gives a logit per
answer sentence: how unsupported that sentence is by that window.

Nothing is truncated silently: the contexts are cut into sentence-aligned windows that
fit beside the answer, a long answer is cut into groups of sentences, and every group is
read against every window. A sentence's support is its best window (lowest logit); the
answer's score is its worst sentence, calibrated into a probability of hallucination.
Only the last ``max_question_tokens`` of the question (or dialogue history) are read: it
frames the answer but is not evidence.

Runtime dependencies: ``onnxruntime``, ``tokenizers`` and ``numpy`` (core dependencies),
imported lazily; the model is loaded once per process, on first use.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tracefact.evaluators.base import (
    FACTUAL,
    HALLUCINATED,
    EvalCase,
    EvalResult,
    EvaluatorDescription,
    InvalidCaseError,
)
from tracefact.evaluators.local.alignment import FEATURES, copied_shares, sentence_features
from tracefact.evaluators.local.batching import Batcher
from tracefact.evaluators.local.config import ModelConfig
from tracefact.evaluators.local.runtime import Runtime, load_runtime, model_dir
from tracefact.evaluators.local.windows import aggregate, plan_case


def _sigmoid(value: float) -> float:
    if value == -math.inf:
        return 0.0
    if value >= 0:
        return 1.0 / (1.0 + math.exp(-value))
    exp = math.exp(value)
    return exp / (1.0 + exp)


@dataclass(frozen=True)
class SentenceEvidence:
    """One case's answer sentences and a feature row per sentence."""

    sentences: list[str]
    rows: list[list[float]]
    sequences: int
    """Model inputs read for the case (windows x answer groups)."""
    copied: list[float]
    """Per sentence, its share copied from the contexts (`alignment.copied_shares`)."""


class LocalFactuality:
    """Offline hallucination score from the embedded int8 ONNX cross-encoder.

    ``threshold`` overrides the tuned one from ``config.json``. Concurrent `evaluate`
    calls are grouped (micro-batching): calls made in the same event-loop iteration, and
    while the model is busy those arriving within ``max_wait_ms``, up to
    ``max_batch_cases``, run as one `evaluate_batch` in a worker thread. ``stats`` counts
    the batches, cases and model sequences (one run each) of this instance. Cases longer
    than ``max_case_chars`` (answer plus contexts; about 200 model runs at the default)
    are refused with `InvalidCaseError` rather than read for seconds.
    """

    def __init__(
        self,
        name: str = "hallucination",
        threshold: float | None = None,
        model_path: str | Path | None = None,
        max_batch_cases: int = 64,
        max_wait_ms: float = 5.0,
        max_case_chars: int = 200_000,
    ) -> None:
        if threshold is not None and not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be within (0, 1), got {threshold}")
        if max_batch_cases < 1 or max_wait_ms < 0 or max_case_chars < 1:
            raise ValueError("max_batch_cases and max_case_chars must be >= 1 and max_wait_ms >= 0")
        self.max_case_chars = max_case_chars
        self.name = name
        self.model_path = Path(model_path) if model_path is not None else model_dir()
        self._threshold = threshold
        self.max_batch_cases = max_batch_cases
        self.max_wait_ms = max_wait_ms
        self._batchers: dict[asyncio.AbstractEventLoop, Batcher] = {}
        self._stats: Counter[str] = Counter(batches=0, cases=0, sequences=0)
        self._stats_lock = threading.Lock()  # batches run on executor threads

    @property
    def stats(self) -> dict[str, int]:
        """Counters of this instance.

        `evaluate_batch` calls, cases, model sequences (one run each).
        """
        with self._stats_lock:
            return dict(self._stats)

    def _load(self) -> Runtime:
        return load_runtime(self.model_path.resolve())

    def load(self) -> float:
        """Load the model now (it loads lazily otherwise); returns this process's load time."""
        return self._load().load_seconds

    @property
    def threshold(self) -> float:
        if self._threshold is not None:
            return self._threshold
        return self._load().config.threshold

    def describe(self) -> EvaluatorDescription:
        with open(self.model_path / "config.json", encoding="utf-8") as handle:
            shipped = json.load(handle)
        threshold = self._threshold if self._threshold is not None else shipped["threshold"]
        return EvaluatorDescription(
            name=self.name,
            evaluator="local-factuality",
            model=f"local-factuality-{shipped.get('version', 'unknown')}",
            settings={"threshold": threshold},
        )

    async def evaluate(self, case: EvalCase) -> EvalResult:
        self._check(case)
        loop = asyncio.get_running_loop()
        batcher = self._batchers.get(loop)
        if batcher is None:
            for old in [other for other in self._batchers if other.is_closed()]:
                del self._batchers[old]
            batcher = Batcher(loop, self.evaluate_batch, self.max_batch_cases, self.max_wait_ms)
            self._batchers[loop] = batcher
        return await batcher.submit(case)

    def _check(self, case: EvalCase) -> None:
        if not any(context.strip() for context in case.contexts):
            raise InvalidCaseError("LocalFactuality needs at least one non-empty context")
        size = len(case.output) + sum(len(context) for context in case.contexts)
        if size > self.max_case_chars:
            # Every character is read (nothing is cut silently), so cost grows with size:
            # refuse clearly rather than hold a CPU for minutes.
            raise InvalidCaseError(
                f"answer and contexts are {size:,} characters, over max_case_chars="
                f"{self.max_case_chars:,}; raise the limit or pass fewer contexts"
            )

    def sentence_evidence(self, cases: Sequence[EvalCase]) -> list[SentenceEvidence]:
        """Each case's answer sentences with their feature rows (`alignment.FEATURES`).

        The model's logit per sentence (its best-supported reading over all windows)
        followed by the alignment features; what the combiner weighs, and what
        ``scripts/fit_local_factuality_combiner.py`` fits it on.
        """
        for case in cases:
            self._check(case)
        runtime = self._load()
        config = runtime.config
        plans = [
            plan_case(runtime.tokenizer, case.input, case.contexts, case.output, config)
            for case in cases
        ]
        windows = [window for plan in plans for window in plan.windows]
        logits = runtime.unit_logits(windows)
        with self._stats_lock:
            self._stats.update(batches=1, cases=len(cases), sequences=len(windows))
        evidence: list[SentenceEvidence] = []
        offset = 0
        for case, plan in zip(cases, plans, strict=True):
            count = len(plan.windows)
            _, sentence_logits = aggregate(plan, logits[offset : offset + count])
            offset += count
            aligned = sentence_features(case.input, case.contexts, plan.sentences)
            rows = [[logit, *row] for logit, row in zip(sentence_logits, aligned, strict=True)]
            copied = copied_shares(case.contexts, plan.sentences)
            evidence.append(SentenceEvidence(plan.sentences, rows, len(plan.windows), copied))
        return evidence

    def evaluate_batch(self, cases: Sequence[EvalCase]) -> list[EvalResult]:
        """Judge many cases in one go (synchronous; what concurrent `evaluate` calls share)."""
        started = time.perf_counter()
        evidence = self.sentence_evidence(cases)
        config = self._load().config
        elapsed_ms = (time.perf_counter() - started) * 1000
        return [self._result(item, config, elapsed_ms) for item in evidence]

    def _result(
        self, evidence: SentenceEvidence, config: ModelConfig, elapsed_ms: float
    ) -> EvalResult:
        threshold = self.threshold
        evaluator = f"local-factuality({config.version})"
        if not evidence.sentences:
            return EvalResult(
                name=self.name,
                label=FACTUAL,
                score=0.0,
                explanation="The answer is empty: nothing to check.",
                evaluator=evaluator,
                latency_ms=elapsed_ms,
                cost_usd=0.0,
                raw={"sentences": 0, "threshold": threshold},
            )
        sentence_scores = [
            _sigmoid(config.bias + sum(w * x for w, x in zip(config.weights, row, strict=True)))
            for row in evidence.rows
        ]
        # A sentence copied from the context is as supported as an answer gets, whatever
        # the model makes of its style (HaluEval's faithful answers are rarely sentences).
        sentence_scores = [
            min(value, config.copied_score) if share >= config.copied_share else value
            for value, share in zip(sentence_scores, evidence.copied, strict=True)
        ]
        # The answer is as unsupported as its worst sentence.
        score = max(sentence_scores)
        flagged = [
            (sentence, value)
            for sentence, value in zip(evidence.sentences, sentence_scores, strict=True)
            if value >= threshold
        ]
        unsupported = [sentence for sentence, _ in flagged]
        label = HALLUCINATED if score >= threshold else FACTUAL
        if flagged:
            quoted = "; ".join(f"{sentence!r} ({value:.2f})" for sentence, value in flagged)
            explanation = (
                f"{len(flagged)} of {len(evidence.sentences)} answer sentence(s) not "
                f"supported by the contexts: {quoted}"
            )
        else:
            explanation = (
                f"All {len(evidence.sentences)} answer sentence(s) supported by the contexts "
                f"(worst sentence score {score:.2f} < {threshold:.2f})"
            )
        return EvalResult(
            name=self.name,
            label=label,
            score=score,
            explanation=explanation,
            unsupported=unsupported,
            evaluator=evaluator,
            latency_ms=elapsed_ms,
            cost_usd=0.0,
            annotator_kind="CODE",
            raw={
                "p_hallucinated": score,
                "threshold": threshold,
                "sentence_scores": [round(value, 4) for value in sentence_scores],
                "features": dict(
                    zip(FEATURES, evidence.rows[sentence_scores.index(score)], strict=True)
                ),
                "sequences": evidence.sequences,
                "copied_shares": [round(value, 4) for value in evidence.copied],
            },
        )
