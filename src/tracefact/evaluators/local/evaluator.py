"""`LocalFactuality`: an embedded, offline hallucination detector for production answers.

Each answer sentence is aligned to the units of evidence that support it
(`alignment`: context sentences, or a tool result's records); explicit checks compare
its numbers, dates, names, negation, direction words and parties with that evidence
(`facts`); a 6-layer MiniLM cross-encoder (int8 ONNX), trained on production-shaped
answers, reads the sentence beside its ranked evidence (`inputs`) for what the checks
cannot see. A logistic combiner turns the model's logit and the checks into a
probability per sentence; the answer is as unsupported as its worst sentence, calibrated
(Platt) on production-style tuning data, so that the score is a probability of
hallucination and the threshold is where balanced accuracy peaks. The explanation names
the unsupported sentence and what the checks found wrong in it.

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

from tracefact.evaluators._text import split_sentences
from tracefact.evaluators.base import (
    FACTUAL,
    HALLUCINATED,
    EvalCase,
    EvalResult,
    EvaluatorDescription,
    InvalidCaseError,
)
from tracefact.evaluators.local.alignment import (
    FEATURES,
    Evidence,
    SentenceSupport,
    support,
    topic_overlap,
    yes_or_no,
)
from tracefact.evaluators.local.batching import Batcher
from tracefact.evaluators.local.config import ModelConfig, case_terms
from tracefact.evaluators.local.inputs import model_inputs
from tracefact.evaluators.local.runtime import Runtime, load_runtime, model_dir

NOT_READ = -10.0
"""The model logit of a sentence not judged (so not read), as the combiner was fitted."""


def _sigmoid(value: float) -> float:
    if value >= 0:
        return 1.0 / (1.0 + math.exp(-value))
    exp = math.exp(value)
    return exp / (1.0 + exp)


@dataclass(frozen=True)
class SentenceEvidence:
    """One case's answer sentences, their support and a feature row per sentence."""

    supports: list[SentenceSupport]
    rows: list[list[float]]
    """Per sentence: the model's logit (its worst piece; -10 where the sentence is not
    judged, so not read), then `SentenceSupport.row`."""
    sequences: int
    """Model inputs read for the case."""
    question: str
    """The case's input, whose shape the calibration weighs (`config.case_terms`)."""
    topic_overlap: float
    """How much of the question or the answer the contexts are about
    (`alignment.topic_overlap`), which the calibration also weighs."""

    @property
    def sentences(self) -> list[str]:
        return [item.sentence for item in self.supports]


class LocalFactuality:
    """Offline hallucination score from the embedded verifier.

    ``threshold`` overrides the tuned one from ``config.json``. Concurrent `evaluate`
    calls are grouped (micro-batching): calls made in the same event-loop iteration, and
    while the model is busy those arriving within ``max_wait_ms``, up to
    ``max_batch_cases``, run as one `evaluate_batch` in a worker thread. ``stats`` counts
    the batches, cases and model sequences (one run each) of this instance. Cases longer
    than ``max_case_chars`` (question, answer and contexts) are refused with `InvalidCaseError`
    rather than read for seconds.
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
        self._runtime: Runtime | None = None
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
        # Looked up once: resolving the path cost more than a case's tokenizer pass.
        if self._runtime is None:
            self._runtime = load_runtime(self.model_path.resolve())
        return self._runtime

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
        size = len(case.input) + len(case.output) + sum(len(text) for text in case.contexts)
        if size > self.max_case_chars:
            # Every character is read (nothing is cut silently), so cost grows with size:
            # refuse clearly rather than hold a CPU for minutes.
            raise InvalidCaseError(
                f"question, answer and contexts are {size:,} characters, over max_case_chars="
                f"{self.max_case_chars:,}; raise the limit or pass fewer contexts"
            )

    def sentence_evidence(self, cases: Sequence[EvalCase]) -> list[SentenceEvidence]:
        """Each case's answer sentences with their support and feature rows (`FEATURES`).

        What the combiner weighs, and what ``scripts/fit_local_factuality_combiner.py``
        fits it on.
        """
        for case in cases:
            self._check(case)
        runtime = self._load()
        evidence: list[SentenceEvidence] = []
        sequences = 0
        for case in cases:
            sentences = split_sentences(case.output)
            found = Evidence.of(case.contexts)
            supports = support(found, case.input, sentences)
            inputs = model_inputs(
                runtime.tokenizer,
                case.input,
                sentences,
                [unit.text for unit in found.units],
                [item.ranked for item in supports],
                runtime.config,
                judged=[item.judged for item in supports],
            )
            sentence_logits = [-math.inf] * len(sentences)
            for item, logit in zip(inputs, runtime.logits(inputs), strict=True):
                sentence_logits[item.sentence] = max(sentence_logits[item.sentence], logit)
            rows = [
                [logit if math.isfinite(logit) else NOT_READ, *item.row]
                for logit, item in zip(sentence_logits, supports, strict=True)
            ]
            sequences += len(inputs)
            overlap = topic_overlap(found, case.input, case.output)
            evidence.append(SentenceEvidence(supports, rows, len(inputs), case.input, overlap))
        with self._stats_lock:
            self._stats.update(batches=1, cases=len(cases), sequences=sequences)
        return evidence

    def evaluate_batch(self, cases: Sequence[EvalCase]) -> list[EvalResult]:
        """Judge many cases in one go (synchronous; what concurrent `evaluate` calls share)."""
        started = time.perf_counter()
        evidence = self.sentence_evidence(cases)
        config = self._load().config
        elapsed_ms = (time.perf_counter() - started) * 1000
        return [self._result(item, config, elapsed_ms) for item in evidence]

    def _no_sentence_judged(
        self,
        evidence: SentenceEvidence,
        score: float,
        off_topic: str,
        evaluator: str,
        elapsed_ms: float,
    ) -> EvalResult:
        """The verdict on an answer none of whose sentences claims anything to check."""
        unsupported = score >= self.threshold
        return EvalResult(
            name=self.name,
            label=HALLUCINATED if unsupported else FACTUAL,
            score=score,
            explanation=f"{off_topic}A bare yes or no rests on nothing in them."
            if unsupported
            else "The answer makes no claim to check.",
            unsupported=evidence.sentences if unsupported else [],
            evaluator=evaluator,
            latency_ms=elapsed_ms,
            cost_usd=0.0,
            annotator_kind="CODE",
            raw={
                "sentences": len(evidence.supports),
                "threshold": self.threshold,
                "topic_overlap": round(evidence.topic_overlap, 4),
            },
        )

    def _result(
        self, evidence: SentenceEvidence, config: ModelConfig, elapsed_ms: float
    ) -> EvalResult:
        threshold = self.threshold
        evaluator = f"local-factuality({config.version})"
        judged = [i for i, item in enumerate(evidence.supports) if item.judged]
        worst_weight, *shape_weights, intercept = config.calibration
        terms = case_terms(len(judged), evidence.question, evidence.topic_overlap)
        offset = intercept + sum(w * x for w, x in zip(shape_weights, terms, strict=True))
        off_topic = (
            f"The contexts are about something else: at most {evidence.topic_overlap:.0%} "
            "of the question's or the answer's words are in them. "
            if terms[-1] > 0
            else ""
        )
        if not judged:
            # A bare yes or no claims what the question asks: over contexts about another
            # subject it rests on nothing, scored as the calibration scores an answer of
            # which no sentence was read.
            score = 0.0
            if off_topic and yes_or_no(evidence.sentences):
                score = _sigmoid(worst_weight * NOT_READ + offset)
            return self._no_sentence_judged(evidence, score, off_topic, evaluator, elapsed_ms)
        scores = [0.0] * len(evidence.supports)
        for index in judged:
            row = evidence.rows[index]
            raw = config.bias + sum(w * x for w, x in zip(config.weights, row, strict=True))
            scores[index] = _sigmoid(worst_weight * raw + offset)
        worst = max(judged, key=lambda i: scores[i])
        score = scores[worst]
        flagged = [i for i in judged if scores[i] >= threshold]
        label = HALLUCINATED if score >= threshold else FACTUAL
        if flagged:
            parts = []
            for index in flagged:
                item = evidence.supports[index]
                reasons = "; ".join(f.reason for f in item.findings[:3])
                why = f": {reasons}" if reasons else ": the contexts do not support it"
                parts.append(f"{item.sentence!r} ({scores[index]:.2f}){why}")
            explanation = (
                f"{len(flagged)} of {len(judged)} answer sentence(s) not supported by the "
                f"contexts. {off_topic}" + " | ".join(parts)
            )
        else:
            explanation = (
                f"All {len(judged)} answer sentence(s) supported by the contexts "
                f"(worst sentence score {score:.3f} < {threshold:.3f})"
            )
        return EvalResult(
            name=self.name,
            label=label,
            score=score,
            explanation=explanation,
            unsupported=[evidence.supports[i].sentence for i in flagged],
            evaluator=evaluator,
            latency_ms=elapsed_ms,
            cost_usd=0.0,
            annotator_kind="CODE",
            raw={
                "p_hallucinated": score,
                "threshold": threshold,
                "sentence_scores": [round(value, 4) for value in scores],
                "features": dict(zip(FEATURES, evidence.rows[worst], strict=True)),
                "findings": [
                    {"check": f.check, "text": f.text, "reason": f.reason}
                    for f in evidence.supports[worst].findings
                ],
                "sequences": evidence.sequences,
                "topic_overlap": round(evidence.topic_overlap, 4),
            },
        )
