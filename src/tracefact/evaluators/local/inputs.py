"""How a case becomes model inputs: one per answer sentence, beside its own evidence.

Each answer sentence is read with the question's last words, the sentence before it (what
"it" refers to) and the units of evidence
that support it best (`alignment.SentenceSupport.ranked`), as many as fit, in the order
they stand in the contexts. The cost of a case grows with its answer, not with its
contexts: a long document costs one tokenizer pass and an alignment, never more model runs.
Training (``scripts/train_local_factuality.py``) builds its inputs with the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tracefact.evaluators.local.config import ModelConfig

__all__ = ["HFTokenizer", "ModelInput", "TokenizerLike", "model_inputs"]


@dataclass(frozen=True)
class ModelInput:
    """One model run: ``[CLS] question, sentence before [SEP] sentence [SEP] evidence [SEP]``."""

    ids: list[int]
    type_ids: list[int]
    sentence: int
    """Index of the answer sentence it reads (a long sentence is read in pieces)."""


class TokenizerLike:
    """What `model_inputs` needs of a tokenizer: token ids of many texts, no special tokens."""

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


def model_inputs(
    tokenizer: TokenizerLike,
    question: str,
    sentences: Sequence[str],
    evidence: Sequence[str],
    ranked: Sequence[Sequence[int]],
    config: ModelConfig,
    judged: Sequence[bool] | None = None,
) -> list[ModelInput]:
    """The inputs of one case.

    Each sentence (in pieces of `max_sentence_tokens`) with the best-ranked units of
    ``evidence`` that fit, in their order in the contexts. Sentences whose ``judged`` is
    false ("Let me know if you need anything else") get no run: no score weighs them, but
    they still stand before the next sentence as what its "it" refers to.
    """
    encoded = tokenizer.encode_many([question, *sentences, *evidence])
    question_ids = encoded[0][-config.max_question_tokens :] if question.strip() else []
    sentence_ids = encoded[1 : 1 + len(sentences)]
    unit_ids = encoded[1 + len(sentences) :]
    inputs = []
    for index, (ids, order) in enumerate(zip(sentence_ids, ranked, strict=True)):
        if judged is not None and not judged[index]:
            continue
        # The sentence before says what "it" or "also" refers to.
        before = sentence_ids[index - 1][-config.max_previous_tokens :] if index else []
        head = [config.cls_id, *question_ids, *before, config.sep_id]
        for start in range(0, max(len(ids), 1), config.max_sentence_tokens):
            piece = ids[start : start + config.max_sentence_tokens]
            if not piece:
                continue
            first = [*head, *piece, config.sep_id]
            budget = config.max_length - len(first) - 1
            chosen: list[tuple[int, list[int]]] = []
            for unit in order:
                if budget <= 0:
                    break
                taken = unit_ids[unit][:budget]
                if taken:
                    chosen.append((unit, taken))
                    budget -= len(taken)
            context = [token for _, taken in sorted(chosen) for token in taken]
            ids_ = [*first, *context, config.sep_id]
            inputs.append(ModelInput(ids_, [0] * len(first) + [1] * (len(context) + 1), index))
    return inputs
