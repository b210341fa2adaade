"""Where in the contexts does an answer sentence come from, and what is missing there?

`LocalFactuality` combines its model's sentence logits with these alignment features.
The model reads windows of the contexts and can be swayed by an answer's style; the
features check the answer against the evidence literally: words and names absent from
all contexts, and above all names and numbers absent from the context sentence the
answer sentence is anchored to (a swapped name that occurs elsewhere in the context
passes a bag-of-words check but not this one). Pure Python, microseconds per case.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from tracefact.evaluators._text import content_words, split_sentences

FEATURES = (
    "model_logit",
    "missing_words",
    "missing_keys",
    "anchored_missing_words",
    "anchored_missing_keys",
    "paired_missing_keys",
)
"""Names of the per-sentence features, in the order of `sentence_features` rows."""

_KEY = re.compile(r"\b(?:\d[\d,.]*\d|\d)\b|\b[A-Z][\w'\-]*")
_QUESTION_WORDS = 24
"""Only the end of a long question or dialogue history anchors the answer."""


def _key(token: str) -> str:
    return token.lower().removesuffix("'s").rstrip(".,").replace(",", "")


def key_tokens(text: str) -> list[str]:
    """Names and numbers, lower-cased.

    Capitalised words (bar sentence-initial stopwords) and digits.
    """
    keys = []
    for match in _KEY.finditer(text):
        before = text[: match.start()].rstrip()
        initial = not before or before[-1] in ".!?:\"'“"
        if initial and not content_words(match.group()):
            continue  # "The", "She": a capital that only starts a sentence
        keys.append(_key(match.group()))
    return keys


@dataclass(frozen=True)
class _Evidence:
    """The contexts, cut into sentences, with word sets and weights."""

    sentences: list[str]
    words: list[set[str]]
    keys: list[set[str]]
    all_words: set[str]
    all_text: str
    idf: dict[str, float]

    @classmethod
    def of(cls, contexts: Sequence[str]) -> _Evidence:
        sentences = [s for context in contexts for s in split_sentences(context)]
        words = [set(content_words(s)) for s in sentences]
        keys = [
            {_key(k) for k in _KEY.findall(s)} | w for s, w in zip(sentences, words, strict=True)
        ]
        frequency: Counter[str] = Counter(w for ws in words for w in ws)
        idf = {w: math.log(1.0 + len(sentences) / n) for w, n in frequency.items()}
        all_words: set[str] = set().union(*words)
        all_text = " ".join(contexts).lower().replace(",", "")
        return cls(sentences, words, keys, all_words, all_text, idf)

    def weight(self, word: str) -> float:
        return self.idf.get(word, math.log(1.0 + len(self.sentences) + 1.0))

    def best_window(self, anchor: set[str], width: int) -> tuple[set[str], set[str]]:
        """Words and keys of the ``width`` consecutive sentences that best match ``anchor``."""
        if not self.sentences:
            return set(), set()
        best_score, best = -1.0, 0
        count = max(1, len(self.sentences) - width + 1)
        for start in range(count):
            window = set().union(*self.words[start : start + width])
            score = sum(self.weight(w) for w in anchor & window)
            if score > best_score:
                best_score, best = score, start
        return (
            set().union(*self.words[best : best + width]),
            set().union(*self.keys[best : best + width]),
        )


def _share_missing(items: Sequence[str], present: set[str], evidence: _Evidence) -> float:
    if not items:
        return 0.0
    total = sum(evidence.weight(item) for item in items)
    missing = sum(evidence.weight(item) for item in items if item not in present)
    return missing / total if total else 0.0


def _key_missing(keys: Sequence[str], present: set[str], text: str) -> float:
    if not keys:
        return 0.0
    return sum(1 for key in keys if key not in present and key not in text) / len(keys)


def sentence_features(
    question: str, contexts: Sequence[str], sentences: Sequence[str]
) -> list[list[float]]:
    """One row of alignment features per answer sentence (`FEATURES` minus the logit)."""
    evidence = _Evidence.of(contexts)
    question_words = set(content_words(question)[-_QUESTION_WORDS:])
    known = evidence.all_words | question_words
    rows = []
    for sentence in sentences:
        words = [w for w in content_words(sentence) if w not in question_words]
        keys = key_tokens(sentence)
        anchor = set(words) | question_words
        window_words, window_keys = evidence.best_window(anchor, width=1)
        _, pair_keys = evidence.best_window(anchor, width=2)
        rows.append(
            [
                _share_missing(words, known, evidence),
                _key_missing(keys, known, evidence.all_text),
                _share_missing(words, window_words | question_words, evidence),
                _key_missing(keys, window_keys | question_words, ""),
                _key_missing(keys, pair_keys | question_words, ""),
            ]
        )
    return rows


_TOKEN = re.compile(r"[\w'’]+")
_RUN = 3
"""Shortest run of consecutive words that counts as copied: shorter ones match by chance."""
_CLAIM = 0.4
"""Least share of the context sentence(s) a copy must take: a name lifted from a sentence is
a span of it, not a claim it makes (a swapped name is often such a span)."""
_SHORTEST = 5
"""Fewest words of a copy: shorter ones are names or fragments rather than claims."""
_SLACK = frozenset(
    """a an the and or of to in on at for with by as that which who also then its their his
    her is was are were has have had be been""".split()
)
"""Words a near-verbatim copy may add or drop. No negation, name or number is among them,
so a swapped name, number or an added "not" always leaves the copy uncovered."""


def _tokens(text: str) -> list[str]:
    return [token.replace("’", "'") for token in _TOKEN.findall(text.lower())]


def _copied_share(tokens: list[str], first: list[str], second: list[str]) -> float:
    """Share of ``tokens`` copied in order from one context sentence or two adjacent ones."""
    span = first + second
    covered = [False] * len(tokens)
    used: list[int] = []
    for block in SequenceMatcher(None, tokens, span, autojunk=False).get_matching_blocks():
        if block.size >= _RUN:
            covered[block.a : block.a + block.size] = [True] * block.size
            used += [block.b, block.b + block.size - 1]
    if not used or not all(done or t in _SLACK for done, t in zip(covered, tokens, strict=True)):
        return 0.0
    touched = (len(first) if min(used) < len(first) else 0) + (
        len(second) if max(used) >= len(first) else 0
    )
    return sum(covered) / len(tokens) if sum(covered) >= _CLAIM * touched else 0.0


def _says_something(sentence: str) -> bool:
    """Whether a sentence has a word besides names, their particles and slack.

    A title or a name ("Group Chief Economist of Edmond de Rothschild") has none.
    """
    return any(
        word.islower() and len(word) > 3 and word not in _SLACK for word in _TOKEN.findall(sentence)
    )


def copied_shares(contexts: Sequence[str], sentences: Sequence[str]) -> list[float]:
    """Per answer sentence, the share of its words copied from the contexts.

    Words count as copied in runs, in order, from one context sentence (or two adjacent
    ones): 1.0 for a verbatim copy, 0.0 as soon as any word outside the copied runs
    carries meaning (a swapped name or number, an added clause or negation), or when the
    copy is a fragment (a name) rather than a claim of the context.

    Case, punctuation, dropped words and a dropped trailing clause keep a copy whole; an
    added article or auxiliary costs only its own share. `LocalFactuality` caps the score
    of a sentence copied this way: nothing is better supported than the context's words.
    """
    context = [_tokens(s) for text in contexts for s in split_sentences(text)]
    pairs = list(zip(context, [*context[1:], []], strict=True))
    vocabularies = [set(first) | set(second) for first, second in pairs]
    shares = []
    for sentence in sentences:
        tokens = _tokens(sentence)
        if len(tokens) < _SHORTEST or not _says_something(sentence):
            shares.append(0.0)
            continue
        meaningful = set(tokens) - _SLACK
        candidates = [
            pair
            for pair, vocabulary in zip(pairs, vocabularies, strict=True)
            if meaningful <= vocabulary  # else some meaningful word never occurs there
        ]
        shares.append(max((_copied_share(tokens, *pair) for pair in candidates), default=0.0))
    return shares
