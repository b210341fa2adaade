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

Runtime dependencies: ``onnxruntime``, ``tokenizers`` and ``numpy`` (the ``local`` extra),
imported lazily; the model is loaded once per process, on first use.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracefact.evaluators._alignment import FEATURES, copied_shares, sentence_features
from tracefact.evaluators.base import (
    FACTUAL,
    HALLUCINATED,
    EvalCase,
    EvalResult,
    InvalidCaseError,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[a-z0-9)\]][.!?])(?=[A-Z])|\n+")


def split_sentences(text: str) -> list[str]:
    """Split text into sentences (also where a full stop runs straight into a capital)."""
    return [part.strip() for part in _SENTENCE.split(text) if part and part.strip()]


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
    """Per-sentence combiner over `_alignment.FEATURES`, fitted by
    ``scripts/fit_local_factuality_combiner.py``."""
    bias: float = 0.0
    threshold: float = 0.5
    copied_share: float = 1.0
    copied_score: float = 1.0
    """A sentence at least ``copied_share`` copied from one context sentence
    (`_alignment.copied_shares`) scores at most ``copied_score``."""
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


@dataclass
class Window:
    """One model input: a question, a group of answer units and a context window."""

    ids: list[int]
    type_ids: list[int]
    units: list[tuple[int, int, int]]
    """(unit index, start, end) token positions of each answer unit in ``ids``."""


@dataclass
class Plan:
    """How one case is read: its answer sentences, their units and the model inputs."""

    sentences: list[str]
    unit_sentence: list[int] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)


class TokenizerLike:
    """What `plan_case` needs of a tokenizer: token ids of many texts, no special tokens."""

    def encode_many(self, texts: list[str]) -> list[list[int]]:  # pragma: no cover
        raise NotImplementedError


class HFTokenizer(TokenizerLike):
    """A `tokenizers.Tokenizer` loaded from ``tokenizer.json``."""

    def __init__(self, path: str | Path) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(path))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        if not texts:
            return []
        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        return [list(encoding.ids) for encoding in encodings]


def _pieces(ids: list[int], size: int) -> list[list[int]]:
    if len(ids) <= size:
        return [ids]
    return [ids[start : start + size] for start in range(0, len(ids), size)]


def _pack(lengths: list[int], budget: int, slack: float) -> list[tuple[int, int]]:
    """Sentence-aligned, balanced windows: [start, end) index ranges, each <= budget."""
    total = sum(lengths)
    if total <= budget:
        return [(0, len(lengths))]
    count = math.ceil(total / budget)
    target = min(budget, int(math.ceil(total / count) * (1.0 + slack)))
    ranges: list[tuple[int, int]] = []
    start, used = 0, 0
    for index, length in enumerate(lengths):
        if index > start and used + length > target:
            ranges.append((start, index))
            start, used = index, 0
        used += length
    ranges.append((start, len(lengths)))
    return ranges


def plan_case(
    tokenizer: TokenizerLike,
    question: str,
    contexts: Sequence[str],
    answer: str,
    config: ModelConfig,
) -> Plan:
    """Cut a case into model inputs; every answer and context token is read at least once."""
    sentences = split_sentences(answer)
    context_sentences = [s for context in contexts for s in split_sentences(context)]
    encoded = tokenizer.encode_many([question, *sentences, *context_sentences])
    question_ids = encoded[0][-config.max_question_tokens :] if question.strip() else []
    sentence_ids = encoded[1 : 1 + len(sentences)]
    plan = Plan(sentences=sentences)
    units: list[list[int]] = []
    for sentence_index, ids in enumerate(sentence_ids):
        for piece in _pieces(ids, config.max_answer_tokens):
            if not piece:  # nothing the tokenizer can read (e.g. only control characters)
                continue
            units.append(piece)
            plan.unit_sentence.append(sentence_index)
    # Groups of consecutive units that fit in max_answer_tokens.
    groups: list[list[int]] = []
    used = 0
    for unit_index, unit in enumerate(units):
        if groups and used + len(unit) <= config.max_answer_tokens:
            groups[-1].append(unit_index)
            used += len(unit)
        else:
            groups.append([unit_index])
            used = len(unit)
    head = [config.cls_id, *question_ids, config.sep_id] if question_ids else [config.cls_id]
    for group in groups:
        group_len = sum(len(units[u]) for u in group)
        budget = config.max_length - len(head) - group_len - 2
        context_pieces = [
            piece
            for ids in encoded[1 + len(sentences) :]
            for piece in _pieces(ids, budget)
            if piece
        ]
        if not context_pieces:
            context_pieces = [[]]
        ranges = _pack([len(p) for p in context_pieces], budget, config.window_slack)
        for start, end in ranges:
            ids = list(head)
            spans: list[tuple[int, int, int]] = []
            for unit_index in group:
                spans.append((unit_index, len(ids), len(ids) + len(units[unit_index])))
                ids.extend(units[unit_index])
            ids.append(config.sep_id)
            first_context = len(ids)
            for piece in context_pieces[start:end]:
                ids.extend(piece)
            ids.append(config.sep_id)
            type_ids = [0] * first_context + [1] * (len(ids) - first_context)
            plan.windows.append(Window(ids=ids, type_ids=type_ids, units=spans))
    return plan


def aggregate(
    plan: Plan,
    window_logits: list[list[float]],
) -> tuple[float, list[float]]:
    """Answer logit and sentence logits from the unit logits of each window.

    A unit's logit is its lowest over windows (best support); a sentence's the highest
    over its units; the answer's the highest over sentences (worst sentence).
    """
    best: dict[int, float] = {}
    for window, logits in zip(plan.windows, window_logits, strict=True):
        for (unit_index, _, _), logit in zip(window.units, logits, strict=True):
            previous = best.get(unit_index)
            best[unit_index] = logit if previous is None else min(previous, logit)
    sentence_logits = [-math.inf] * len(plan.sentences)
    for unit_index, sentence_index in enumerate(plan.unit_sentence):
        sentence_logits[sentence_index] = max(sentence_logits[sentence_index], best[unit_index])
    answer_logit = max(sentence_logits) if sentence_logits else -math.inf
    return answer_logit, sentence_logits


def model_dir() -> Path:
    """Where the shipped model lives (``tracefact/models/local_factuality``)."""
    from tracefact.models import local_factuality_dir

    return local_factuality_dir()


class _Runtime:
    """The loaded model: ONNX session, tokenizer and config. One per directory per process."""

    def __init__(self, directory: Path) -> None:
        import numpy as np
        import onnxruntime as ort  # type: ignore[import-untyped,unused-ignore]

        started = time.perf_counter()
        with open(directory / "config.json", encoding="utf-8") as handle:
            self.config = ModelConfig.from_dict(json.load(handle))
        self.tokenizer = HFTokenizer(directory / "tokenizer.json")
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, os.cpu_count() or 1)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(
            str(directory / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self._np = np
        self._lock = threading.Lock()
        self.load_seconds = time.perf_counter() - started

    def unit_logits(self, windows: list[Window]) -> list[list[float]]:
        """Per-window unit logits, one unpadded model run per window.

        On 2 cores single runs measured as fast as padded batches or faster, and int8
        activations are quantised per run: a window's logits never depend on which
        other cases arrived with it, so `tracefact eval` and the live pipeline agree.
        """
        np = self._np
        results: list[list[float]] = []
        for window in windows:
            ids = np.array([window.ids], dtype=np.int64)
            feeds = {
                "input_ids": ids,
                "attention_mask": np.ones_like(ids),
                "token_type_ids": np.array([window.type_ids], dtype=np.int64),
            }
            with self._lock:
                token_logits, cls_logits = self.session.run(None, feeds)
            results.append(self._pool(window, token_logits[0], cls_logits[0]))
        return results

    def _pool(
        self, window: Window, tokens: npt.NDArray[np.float32], cls: np.floating[Any]
    ) -> list[float]:
        config = self.config
        out: list[float] = []
        for _, start, end in window.units:
            span = tokens[start:end]
            value = float(cls) + config.mean_weight * float(span.mean())
            value += config.max_weight * float(span.max())
            out.append(value)
        return out


_RUNTIMES: dict[Path, _Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


def _runtime(directory: Path) -> _Runtime:
    with _RUNTIMES_LOCK:
        runtime = _RUNTIMES.get(directory)
        if runtime is None:
            runtime = _Runtime(directory)
            _RUNTIMES[directory] = runtime
        return runtime


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
    copied: list[float]
    """Per sentence, its share copied from the contexts (`_alignment.copied_shares`)."""
    """Model inputs read for the case (windows x answer groups)."""


@dataclass
class _Pending:
    case: EvalCase
    future: asyncio.Future[EvalResult]


class _Batcher:
    """Collects concurrent `evaluate` calls on one event loop into `evaluate_batch` calls."""

    def __init__(self, owner: LocalFactuality, loop: asyncio.AbstractEventLoop) -> None:
        self.owner = owner
        self.loop = loop
        self.pending: list[_Pending] = []
        self.timer: asyncio.TimerHandle | asyncio.Handle | None = None
        self.in_flight = 0

    def submit(self, case: EvalCase) -> asyncio.Future[EvalResult]:
        future: asyncio.Future[EvalResult] = self.loop.create_future()
        self.pending.append(_Pending(case, future))
        if len(self.pending) >= self.owner.max_batch_cases:
            self.flush()
        elif self.timer is None:
            if self.in_flight:
                # The model is busy: gather what arrives meanwhile, for up to max_wait_ms.
                delay = self.owner.max_wait_ms / 1000.0
                self.timer = self.loop.call_later(delay, self.flush)
            else:
                # Idle: run after this loop iteration, with every call made in it.
                self.timer = self.loop.call_soon(self.flush)
        return future

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        batch, self.pending = self.pending, []
        if batch:
            self.in_flight += 1
            task = self.loop.create_task(self._run(batch))
            self.owner._tasks.add(task)
            task.add_done_callback(self.owner._tasks.discard)

    async def _run(self, batch: list[_Pending]) -> None:
        cases = [item.case for item in batch]
        try:
            results = await self.loop.run_in_executor(None, self.owner.evaluate_batch, cases)
        except Exception as exc:
            for item in batch:
                if not item.future.done():
                    item.future.set_exception(exc)
            return
        finally:
            self.in_flight -= 1
        for item, result in zip(batch, results, strict=True):
            if not item.future.done():
                item.future.set_result(result)


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
        self._batchers: dict[asyncio.AbstractEventLoop, _Batcher] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.stats: dict[str, int] = {"batches": 0, "cases": 0, "sequences": 0}
        """Public counters: `evaluate_batch` calls, cases, model sequences (one run each)."""

    def _load(self) -> _Runtime:
        return _runtime(self.model_path.resolve())

    def load(self) -> float:
        """Load the model now (it loads lazily otherwise); returns this process's load time."""
        return self._load().load_seconds

    @property
    def threshold(self) -> float:
        if self._threshold is not None:
            return self._threshold
        return self._load().config.threshold

    def describe(self) -> dict[str, Any]:
        with open(self.model_path / "config.json", encoding="utf-8") as handle:
            shipped = json.load(handle)
        return {
            "name": self.name,
            "evaluator": "local-factuality",
            "model": f"local-factuality-{shipped.get('version', 'unknown')}",
            "threshold": self._threshold if self._threshold is not None else shipped["threshold"],
            "direction": "minimize",
            "source": "code",
            "input_schema": EvalCase.model_json_schema(),
        }

    async def evaluate(self, case: EvalCase) -> EvalResult:
        self._check(case)
        loop = asyncio.get_running_loop()
        batcher = self._batchers.get(loop)
        if batcher is None:
            for old in [other for other in self._batchers if other.is_closed()]:
                del self._batchers[old]
            batcher = self._batchers[loop] = _Batcher(self, loop)
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
        """Each case's answer sentences with their feature rows (`_alignment.FEATURES`).

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
        self.stats["batches"] += 1
        self.stats["cases"] += len(cases)
        self.stats["sequences"] += len(windows)
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
