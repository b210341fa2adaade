"""Sentences and words: the one text splitter every evaluator and feature shares.

The lexical baseline, the local model's windows and its alignment features must cut
text the same way, or a sentence one of them flags is not a sentence the other sees.
"""

from __future__ import annotations

import re

_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[a-z0-9)\]][.!?])(?=[A-Z])|\n+")
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each few
    for from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours
    yourself yourselves yes sure well okay ok""".split()
)


def split_sentences(text: str) -> list[str]:
    """Sentences, cut at line breaks and after '.', '!' or '?'.

    A full stop followed by white space ends a sentence, and so does one that runs
    straight into a capital ("in 1889.The tower").
    """
    return [part.strip() for part in _SENTENCE.split(text) if part and part.strip()]


def content_words(text: str) -> list[str]:
    """Lower-cased words minus stopwords, with a light plural strip so 'prizes' ~ 'prize'."""
    words = []
    for raw in _WORD.findall(text.lower()):
        word = raw.removesuffix("'s")
        if word in STOPWORDS:
            continue
        if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        words.append(word)
    return words
