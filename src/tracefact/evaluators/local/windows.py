"""How a case becomes model inputs: sentence-aligned context windows, nothing truncated.

The contexts are cut into sentence-aligned windows that fit beside the answer, a long
answer is cut into groups of sentences, and every group is read against every window.
`aggregate` turns the logits of those windows back into one logit per answer sentence.
Training (``scripts/train_local_factuality.py``) builds its inputs with the same code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tracefact.evaluators._text import split_sentences
from tracefact.evaluators.local.config import ModelConfig

__all__ = [
    "HFTokenizer",
    "Plan",
    "TokenizerLike",
    "Window",
    "aggregate",
    "plan_case",
    "split_sentences",
]


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
