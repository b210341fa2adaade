"""Production-style training data for LocalFactuality, from HaluEval's train documents.

    python scripts/factuality_synth.py --data ../shared/data --out DIR [--seed 2 --split-seed 1]

Writes ``DIR/train.jsonl`` and ``DIR/tune.jsonl`` (documents split 90/10, so that the
combiner and threshold are fitted on documents the model never read). Each line has the
fields of ``realistic_dev.jsonl`` (``id``, ``input``, ``contexts``, ``output``, ``label``,
``kind``, ``domain``) plus ``evidence`` (``prose`` or ``tool``) and ``sentence_labels``
(1 for each answer sentence that is unsupported, as split by the runtime's splitter).

Answers are written as assistants write them: sentences extracted, trimmed, reordered,
fused from two sources, restated with a framing or a hedge, numbers and dates in another
format, two to four sentences. Hallucinated answers are the same answers with exactly one
sentence made wrong in one of the ways production answers go wrong (a number or date
changed, a contradiction, a name swapped for another of the same context, the roles of
two parties exchanged, two sentences' attributes conflated, one plausible unsupported
sentence added) or written about something else altogether (fabricated). Both labels go
through the same framing and restating, so that style cannot tell them apart.

Evidence is prose (news articles and Wikipedia paragraphs) or tool output: JSON records,
lists of records, nested objects with nulls, plain-text results and conversations where a
later result supersedes an earlier one, generated from schemas of this script's own.
With ``--highlights``, summaries people wrote follow the training cases: HaluEval
summarization train's right answers (CNN/Daily Mail highlights) over their own articles,
each with a twin that has one sentence wrong (`ProseMaker.highlight_pair`).
Everything is seeded.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import itertools
import json
import random
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tracefact.evaluators._text import content_words, split_sentences  # noqa: E402
from tracefact.evaluators.local.facts import OPPOSITES, ROLE_WORDS, name_runs  # noqa: E402

# ---------------------------------------------------------------- documents


@dataclass
class Document:
    """One source document cut into sentences, with the names and numbers it holds."""

    key: str
    domain: str
    sentences: list[str]
    names: list[str] = field(default_factory=list)
    """Capitalised spans ("Brice Robin", "Paris Match"), as written."""

    def passages(self, rng: random.Random) -> list[list[int]]:
        """The document cut into 1-4 passages of consecutive sentence indices."""
        count = len(self.sentences)
        parts = rng.choice([1, 1, 2, 2, 3, 4]) if count >= 6 else 1
        bounds = sorted(rng.sample(range(1, count), min(parts - 1, count - 1))) if parts > 1 else []
        edges = [0, *bounds, count]
        return [list(range(a, b)) for a, b in itertools.pairwise(edges) if b > a]


_SPAN = re.compile(
    r"\b[A-Z][a-zA-Z'’\-]+(?:\s+(?:of|de|van|von|al|bin|la|le|du|del)?\s*[A-Z][a-zA-Z'’\-]+)*"
)
_BAD_SENTENCE = re.compile(
    r"[\"“”|@#]|https?:|\bCNN\b|Daily Mail|\bclick\b|\bscroll\b|\bphoto\b|\bvideo\b|"
    r"\b(?:I|we|We|my|our|Our|me|us|you|You)\b|\?|!|^[a-z(]|:|\.\.|(?:^|\s)'|'(?:\s|$|[.,])|"
    r"\b(?:pictured|left|right|above|below)\)",
)


def clean_sentence(sentence: str) -> str:
    sentence = re.sub(r"\s+", " ", sentence).strip()
    sentence = re.sub(r"^\([^)]*\)\s*", "", sentence)
    sentence = re.sub(r"^(?:[A-Z][\w ,.]*\(CNN\)\s*-*\s*)", "", sentence)
    return sentence


def usable(sentence: str) -> bool:
    """A sentence an assistant could restate: a whole, plain statement of 8-40 words."""
    words = sentence.split()
    return (
        8 <= len(words) <= 40
        and sentence.endswith(".")
        and not _BAD_SENTENCE.search(sentence)
        and sentence.count("(") == sentence.count(")")
    )


def spans(text: str) -> list[str]:
    """Capitalised spans of ``text`` that are names (not a capital that starts it)."""
    wanted = {word for run in name_runs(text) for word in run}
    found = []
    for match in _SPAN.finditer(text):
        span = match.group().strip()
        first = span.split()[0].lower().removesuffix("'s").removesuffix("’s")
        if first in wanted and len(span) > 2:
            found.append(span.removesuffix("'s").removesuffix("’s").rstrip("'’"))
    return found


def document_key(text: str) -> str:
    """A HaluEval record's document (its contexts joined), named by its text."""
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def load_documents(data: Path) -> list[Document]:
    """News articles and Wikipedia paragraphs of the HaluEval train files, deduplicated."""
    documents: dict[str, Document] = {}
    for stem, domain in (("halueval_summarization", "news"), ("halueval_qa", "encyclopedic")):
        with gzip.open(data / f"{stem}_train.jsonl.gz", "rt", encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                text = " ".join(record["contexts"])
                key = document_key(text)
                if key in documents:
                    continue
                sentences = [clean_sentence(s) for s in split_sentences(text)]
                sentences = [s for s in sentences if len(s.split()) >= 4]
                if len(sentences) < 3:
                    continue
                doc = Document(key, domain, sentences)
                doc.names = list(dict.fromkeys(n for s in sentences for n in spans(s)))
                documents[key] = doc
    return list(documents.values())


# ---------------------------------------------------------------- restating (both labels)

_FRAMES = [
    "According to the article, {}", "The report says that {}", "Based on the sources, {}",
    "From what the documents say, {}", "The text states that {}", "As described, {}",
    "In short, {}", "To summarise, {}", "The passage notes that {}", "It says that {}",
    "Per the information provided, {}", "As the source puts it, {}",
]  # fmt: skip
_HEDGES = [
    "It appears that {}", "It seems that {}", "As far as the sources say, {}",
    "If I read it correctly, {}", "From what I can see, {}", "It looks like {}",
]  # fmt: skip
_SIGN_OFFS = [
    "Let me know if you need more detail.", "Hope that helps.", "Happy to dig further.",
    "I can look into any part of this in more depth.",
]  # fmt: skip
_LOWER_FIRST = frozenset(
    """the a an in on at during after before since by last this these those its his her their
    it he she they some many most several all both each two three four five six seven eight
    nine ten one more fewer about around nearly almost there""".split()
)
SYNONYMS: dict[str, list[str]] = {
    "said": ["stated", "told reporters", "explained"],
    "began": ["started"], "started": ["began"], "start": ["begin"], "begin": ["start"],
    "about": ["around", "roughly"], "around": ["about", "roughly"],
    "approximately": ["about", "roughly"], "nearly": ["almost"], "almost": ["nearly"],
    "bought": ["purchased", "acquired"], "purchased": ["bought"], "acquired": ["bought"],
    "big": ["large"], "large": ["big"], "small": ["little"], "huge": ["massive"],
    "showed": ["indicated", "revealed"], "shows": ["indicates"], "revealed": ["showed"],
    "help": ["assist"], "helped": ["assisted"], "because": ["since", "as"],
    "died": ["passed away"], "killed": ["left dead"], "injured": ["hurt"], "hurt": ["injured"],
    "built": ["constructed"], "constructed": ["built"], "made": ["created"], "created": ["made"],
    "founded": ["established", "set up"], "established": ["founded", "set up"],
    "announced": ["revealed", "made public"], "claimed": ["alleged"], "alleged": ["claimed"],
    "received": ["got"], "got": ["received"], "gave": ["handed"], "told": ["informed"],
    "arrested": ["detained", "taken into custody"], "detained": ["held"],
    "charged": ["accused"], "accused": ["charged"], "investigating": ["looking into"],
    "investigation": ["inquiry", "probe"], "inquiry": ["investigation"], "probe": ["inquiry"],
    "police": ["officers", "authorities"], "officials": ["authorities"],
    "company": ["firm", "business"], "firm": ["company"], "business": ["company"],
    "children": ["kids"], "kids": ["children"], "people": ["individuals"],
    "city": ["town"], "home": ["house"], "house": ["home"], "car": ["vehicle"],
    "vehicle": ["car"], "job": ["position", "role"], "role": ["position"],
    "married": ["wed"], "attack": ["assault"], "attacked": ["assaulted"],
    "important": ["significant"], "significant": ["important", "notable"],
    "quickly": ["rapidly", "fast"], "rapidly": ["quickly"], "often": ["frequently"],
    "frequently": ["often"], "also": ["as well"], "however": ["though"],
    "currently": ["at present", "now"], "recently": ["lately"], "later": ["subsequently"],
    "following": ["after"], "prior": ["before"], "leave": ["depart"], "left": ["departed"],
    "went": ["travelled"], "travelled": ["went"], "moved": ["relocated"],
    "known": ["recognised"], "famous": ["well known"], "popular": ["well liked"],
    "film": ["movie"], "movie": ["film"], "song": ["track"], "album": ["record"],
    "team": ["side", "squad"], "match": ["game"], "game": ["match"], "scored": ["netted"],
    "win": ["victory"], "victory": ["win"], "doctors": ["physicians"], "doctor": ["physician"],
    "hospital": ["medical centre"], "needs": ["requires"], "need": ["require"],
    "allowed": ["permitted"], "permitted": ["allowed"], "banned": ["prohibited"],
    "rules": ["regulations"], "law": ["legislation"], "plan": ["proposal", "scheme"],
    "proposal": ["plan"], "deal": ["agreement"], "agreement": ["deal"],
    "money": ["funds"], "funds": ["money"], "cost": ["price"], "paid": ["handed over"],
    "worth": ["valued at"], "earned": ["made"], "says": ["reports"],
}  # fmt: skip
_NUMBER_WORDS = {
    "2": "two", "3": "three", "4": "four", "5": "five", "6": "six", "7": "seven",
    "8": "eight", "9": "nine", "10": "ten", "11": "eleven", "12": "twelve",
}  # fmt: skip
_WORD_NUMBERS = {word: digit for digit, word in _NUMBER_WORDS.items()}
_MONTH_NAMES = [
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
]  # fmt: skip


def lower_first(text: str) -> str:
    first = text.split(" ", 1)[0]
    if first.lower() in _LOWER_FIRST or first.lower() in _WORD_NUMBERS:
        return text[0].lower() + text[1:]
    return text


def upper_first(text: str) -> str:
    return text[0].upper() + text[1:] if text else text


def trim(sentence: str, rng: random.Random) -> str:
    """Drop what an answer leaves out: a leading connective, a trailing attribution."""
    sentence = re.sub(r"^(?:But|And|However|Meanwhile|Also|So|Still|Yet),?\s+", "", sentence)
    if rng.random() < 0.6:
        sentence = re.sub(
            r",\s+(?:he|she|they|police|officials|the \w+)\s+(?:said|says|added|told \w+)\.$",
            ".",
            sentence,
        )
    if rng.random() < 0.4:
        sentence = re.sub(r",\s+according to [^,.]+\.$", ".", sentence)
    if rng.random() < 0.5:
        sentence = re.sub(r"\s*\([^)]*\)", "", sentence)
    return upper_first(sentence.strip())


_WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_WHEN = "|".join([*_WEEKDAYS, *_MONTH_NAMES, "week", "month", "year"])
_TRAILING_TIME = re.compile(
    rf"^(.+?)\s+((?:on|in|last|earlier this|this)\s+(?:{_WHEN})[^,]{{0,20}})\.$"
)


def reorder(sentence: str) -> str:
    """Move a leading time or place phrase to the end, or a trailing one to the front."""
    match = re.match(
        r"^((?:On|In|At|During|After|Before|Since|By|Last|Earlier|Later|This)\s[^,]{2,40}),\s+(.+)\.$",
        sentence,
    )
    if match:
        phrase, rest = match.groups()
        return f"{upper_first(rest)} {phrase[0].lower()}{phrase[1:]}."
    match = _TRAILING_TIME.match(sentence)
    if match and len(match.group(1).split()) > 4:
        rest, phrase = match.groups()
        return f"{upper_first(phrase)}, {lower_first(rest)}."
    return sentence


def restate_words(sentence: str, rng: random.Random, rate: float) -> str:
    """Synonyms for a few words, numbers in words or digits, dates the other way round."""
    out: list[str] = []
    changed = 0
    for token in re.split(r"(\W+)", sentence):
        lower = token.lower()
        if changed < 3 and lower in SYNONYMS and rng.random() < rate:
            replacement = rng.choice(SYNONYMS[lower])
            out.append(upper_first(replacement) if token[:1].isupper() else replacement)
            changed += 1
        elif token in _NUMBER_WORDS and rng.random() < rate:
            out.append(_NUMBER_WORDS[token])
        elif lower in _WORD_NUMBERS and rng.random() < rate:
            out.append(_WORD_NUMBERS[lower])
        else:
            out.append(token)
    text = "".join(out)
    if rng.random() < rate:
        text = re.sub(r"\b(" + "|".join(_MONTH_NAMES) + r") (\d{1,2})\b", r"\2 \1", text)
    if rng.random() < rate:
        text = re.sub(r"\b(\d+(?:\.\d+)?) per ?cent\b", r"\1%", text)
    return contract(text, rng)


PHRASES: dict[str, list[str]] = {
    "is not covered": ["isn't included", "is not included"], "are not covered": ["aren't included"],
    "is covered": ["is included"], "are covered": ["are included"], "in order to": ["to"],
    "a number of": ["several"], "more than": ["over"], "less than": ["under"],
    "as well as": ["and"], "prior to": ["before"], "due to": ["because of"],
    "in addition": ["also"], "said that": ["said"], "announced that": ["announced"],
    "headquartered in": ["based in"], "according to": ["as reported by"],
    "took place": ["happened"], "was held": ["took place"], "at the time": ["then"],
    "is able to": ["can"], "are able to": ["can"], "was unable to": ["couldn't"],
    "went on to": ["later"], "raised": ["lifted", "increased"], "increased": ["raised"],
    "reduced": ["cut", "lowered"], "cut": ["reduced"], "decided": ["chose"],
    "requires": ["needs"], "required": ["needed"], "approved": ["signed off on", "backed"],
    "rejected": ["turned down"], "refused": ["declined"], "reported": ["said"],
    "existing": ["current"], "current": ["present"], "additional": ["extra", "further"],
    "extra": ["additional"], "total": ["overall"], "main": ["primary", "principal"],
    "major": ["big", "key"], "entire": ["whole"], "whole": ["entire"], "several": ["a few"],
    "many": ["lots of", "numerous"], "staff": ["employees"], "employees": ["staff", "workers"],
    "workers": ["staff"], "customers": ["clients"], "problem": ["issue"], "issue": ["problem"],
    "residents": ["locals"], "previous": ["earlier", "prior"], "earlier": ["previous"],
    "stated": ["said"], "explained": ["said"], "described": ["called"], "wanted": ["hoped"],
    "attempted": ["tried"], "tried": ["attempted"], "obtained": ["got"], "contains": ["holds"],
    "includes": ["has", "comes with"], "include": ["cover"], "provides": ["gives", "offers"],
    "offers": ["provides"], "continued": ["carried on"], "remained": ["stayed"],
    "stayed": ["remained"], "returned": ["came back"], "discovered": ["found"],
    "found": ["discovered"], "believed": ["thought"], "appeared": ["seemed"],
    "occurred": ["happened"], "happened": ["occurred"], "completed": ["finished"],
    "finished": ["completed"], "ended": ["finished"], "commenced": ["began"],
    "shortly": ["soon"], "immediately": ["straight away", "at once"], "approximately": ["about"],
    "roughly": ["about"], "largest": ["biggest"], "biggest": ["largest"], "smallest": ["tiniest"],
    "fell": ["dropped", "declined"], "dropped": ["fell"], "rose": ["climbed", "went up"],
    "climbed": ["rose"], "grew": ["expanded"], "won": ["took"], "lost": ["was beaten in"],
    "joined": ["became part of"], "launched": ["introduced", "rolled out"],
    "introduced": ["brought in"], "replaced": ["took the place of"], "warned": ["cautioned"],
    "urged": ["called on"], "criticised": ["attacked"], "praised": ["commended"],
    "located": ["situated"], "situated": ["located"], "named": ["called"], "called": ["named"],
    "aged": ["age"], "spokesman": ["spokesperson"], "spokeswoman": ["spokesperson"],
}  # fmt: skip
"""Words and phrases that assistants restate, for deep paraphrases (`Style.deep`)."""

NEGATIVES: dict[str, list[str]] = {
    "failed to": ["did not", "didn't"], "had failed to": ["did not"],
    "has failed to": ["has not managed to"], "have failed to": ["have not managed to"],
    "were unable to": ["couldn't", "could not"], "is unable to": ["can't", "cannot"],
    "are unable to": ["can't", "cannot"], "refused to": ["would not", "wouldn't"],
    "declined to": ["would not", "did not"], "forgot to": ["did not remember to"],
    "has refused to": ["has not agreed to"], "have refused to": ["have not agreed to"],
    "had refused to": ["would not"], "has declined to": ["has not agreed to"],
    "have declined to": ["have not agreed to"], "had declined to": ["did not"],
    "lacks": ["does not have"], "lacked": ["did not have"], "disagreed": ["did not agree"],
    "unclear": ["not clear"], "unknown": ["not known"], "unavailable": ["not available"],
    "incorrect": ["not correct"], "impossible": ["not possible"], "unlikely": ["not likely"],
    "uncommon": ["not common"], "unsafe": ["not safe"], "invalid": ["not valid"],
    "insufficient": ["not enough"], "unsuccessful": ["not successful"],
    "inactive": ["not active"], "ineligible": ["not eligible"], "unpaid": ["not paid"],
    "unaware": ["not aware"], "rarely": ["not often"], "seldom": ["not often"],
    "not allowed": ["prohibited", "forbidden"], "not permitted": ["forbidden"],
    "not possible": ["impossible"], "not available": ["unavailable"],
    "not clear": ["unclear"], "not known": ["unknown"], "not able to": ["unable to"],
    "did not succeed": ["failed"], "not enough": ["insufficient"],
}  # fmt: skip
"""Negatives restated as assistants restate them: a "not" the source writes as a verb or a
prefix ("failed to", "unable", "unclear"), and back (`restate_negatives`)."""


def _any_of(table: dict[str, list[str]]) -> re.Pattern[str]:
    """Any key of ``table`` as a whole word or phrase, the longest first, in any case."""
    keys = sorted(map(re.escape, table), key=len, reverse=True)
    return re.compile(r"\b(" + "|".join(keys) + r")\b", re.I)


def _restated(
    sentence: str,
    table: dict[str, list[str]],
    pattern: re.Pattern[str],
    rng: random.Random,
    keep: float,
    most: int | None = None,
) -> str:
    """Each of ``table``'s keys in ``sentence`` replaced by one of its restatements.

    A share ``keep`` of them stays as written; after ``most`` replacements the rest do.
    """
    changed = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal changed
        token = match.group()
        if (most is not None and changed >= most) or rng.random() < keep:
            return token
        changed += 1
        replacement = rng.choice(table[token.lower()])
        return upper_first(replacement) if token[:1].isupper() else replacement

    return pattern.sub(replace, sentence)


_NEGATIVE_PHRASE = _any_of(NEGATIVES)


def restate_negatives(sentence: str, rng: random.Random) -> str:
    """Most of a sentence's written-out negatives restated, whatever the answer's depth.

    Without this an answer's "not" that the source does not write would come almost only
    from contradictions, and a model would learn that every such "not" is wrong.
    """
    return _restated(sentence, NEGATIVES, _NEGATIVE_PHRASE, rng, keep=0.2)


_PHRASE = _any_of(PHRASES)
_DROPPABLE = re.compile(
    r"\s+\b(?:already|also|still|just|currently|reportedly|recently|now|very|really|"
    r"initially|originally|officially|eventually|finally|later|then)\b(?=[\s,])",
    re.I,
)
_APPOSITIVE = re.compile(r",\s+(?:who|which|where|whose|a|an|the)\s+[^,;()]{3,60}?,(?=\s)")
_PASSIVE = re.compile(
    r"^(The [a-z]+(?: [a-z]+)?|[A-Z][a-z]+(?: [A-Z][a-z]+)?) (was|were) ([a-z]+ed) by "
    r"((?:the )?[A-Z][\w'-]+(?: [A-Z][\w'-]+){0,2})"
    r"(\s(?:on|in|at|after|before|during|for|last)\s[^,;]*)?\.$"
)


def simplify(sentence: str, rng: random.Random) -> str:
    """What a deep paraphrase leaves out of a context sentence before it is restated.

    An appositive or relative clause, an adverb; a passive "X was built by Y" turned
    active. Done to the sentence before any perturbation, so what is made wrong survives.
    """
    if rng.random() < 0.5:
        sentence = _APPOSITIVE.sub("", sentence, count=1)
    if rng.random() < 0.5:
        sentence = _DROPPABLE.sub("", sentence, count=2)
    match = _PASSIVE.match(sentence)
    if match and rng.random() < 0.7:
        patient, _, verb, agent, rest = match.groups()
        patient = patient if patient.split()[0] != "The" else "the" + patient[3:]
        sentence = f"{upper_first(agent)} {verb} {patient}{rest or ''}."
    return sentence


def restate_phrases(sentence: str, rng: random.Random) -> str:
    """Many more words restated than `restate_words` does (`Style.deep`)."""
    return _restated(sentence, PHRASES, _PHRASE, rng, keep=0.35, most=6)


_CONTRACTIONS = {
    "is not": "isn't", "are not": "aren't", "was not": "wasn't", "were not": "weren't",
    "has not": "hasn't", "have not": "haven't", "had not": "hadn't", "does not": "doesn't",
    "do not": "don't", "did not": "didn't", "cannot": "can't", "can not": "can't",
    "will not": "won't", "would not": "wouldn't", "could not": "couldn't",
    "should not": "shouldn't", "must not": "mustn't",
}  # fmt: skip
_CONTRACTED_FORMS = {short: long for long, short in _CONTRACTIONS.items() if long != "can not"}


def contract(text: str, rng: random.Random) -> str:
    """Negations written as assistants write them, contracted or not, on either label.

    A "not" or an "n't" must never tell a hallucination apart by itself.
    """
    roll = rng.random()
    if roll < 0.45:
        for long, short in _CONTRACTIONS.items():
            text = re.sub(rf"\b{long}\b", short, text)
    elif roll < 0.6:
        for short, long in _CONTRACTED_FORMS.items():
            text = re.sub(rf"\b{re.escape(short)}", long, text)
    return text


def frame(sentence: str, rng: random.Random, style: Style) -> str:
    if style.frame and rng.random() < 0.8:
        return style.frame.format(lower_first(sentence))
    if style.hedge and rng.random() < 0.8:
        return style.hedge.format(lower_first(sentence))
    return sentence


@dataclass
class Style:
    """How one answer is written; drawn once per case, the same for both labels."""

    frame: str | None
    hedge: str | None
    rate: float
    reorder: bool
    sign_off: str | None
    deep: bool
    """Restated deeply (`simplify`, `restate_phrases`), as most production answers are."""

    @classmethod
    def draw(cls, rng: random.Random) -> Style:
        roll = rng.random()
        return cls(
            frame=rng.choice(_FRAMES) if roll < 0.3 else None,
            hedge=rng.choice(_HEDGES) if 0.3 <= roll < 0.42 else None,
            rate=rng.choice([0.0, 0.2, 0.4, 0.6]),
            reorder=rng.random() < 0.4,
            sign_off=rng.choice(_SIGN_OFFS) if rng.random() < 0.08 else None,
            deep=rng.random() < 0.5,
        )


def restate(sentence: str, rng: random.Random, style: Style, first: bool) -> str:
    sentence = trim(sentence, rng)
    if style.reorder:
        sentence = reorder(sentence)
    if style.deep:
        sentence = restate_phrases(sentence, rng)
    sentence = restate_negatives(sentence, rng)
    sentence = restate_words(sentence, rng, style.rate)
    if first:
        sentence = frame(sentence, rng, style)
    return upper_first(sentence)


def fuse(first: str, second: str, rng: random.Random) -> str:
    """Two sentences as one: "A, and b." / "A; b." / "A, while b."."""
    joiner = rng.choice([", and ", "; ", ", while ", ", and "])
    return first.rstrip(".") + joiner + lower_first(second)


# ---------------------------------------------------------------- perturbations (one sentence)

_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w.]*\d)")
_WORDS = "|".join(list(_WORD_NUMBERS))
_WORD_NUMBER = re.compile(rf"\b({_WORDS})\b", re.I)
_MONTH = re.compile(r"\b(" + "|".join(_MONTH_NAMES) + r")\b")


def _new_number(text: str, rng: random.Random) -> str:
    digits = text.replace(",", "")
    value = float(digits)
    if "." in digits:
        decimals = len(digits.split(".")[1])
        new = value + rng.choice([-1, 1]) * rng.choice([0.1, 0.2, 0.3, 0.5, 1.0]) * max(
            1.0, value / 3
        )
        out = f"{max(new, 0.1):.{decimals}f}"
    elif 1900 <= value <= 2030 and len(digits) == 4:
        out = str(int(value) + rng.choice([-7, -5, -3, -2, -1, 1, 2, 3, 4, 6]))
    elif value < 10:
        out = str(rng.choice([v for v in range(2, 13) if v != int(value)]))
    else:
        factor = rng.choice([0.5, 0.6, 0.75, 0.8, 1.25, 1.4, 1.5, 2, 3])
        new = round(value * factor)
        if new == int(value):
            new += rng.choice([-2, 2, 5])
        out = f"{new:,}" if "," in text else str(new)
    return out


def change_number(sentence: str, doc: Document, rng: random.Random) -> str | None:
    """A number, a number word, a year or a month changed.

    Sometimes to one the document gives elsewhere, as a conflated value would be.
    """
    options: list[tuple[int, int, str]] = []
    for match in _NUMBER.finditer(sentence):
        options.append((match.start(), match.end(), _new_number(match.group(), rng)))
    for match in _WORD_NUMBER.finditer(sentence):
        digit = _WORD_NUMBERS[match.group().lower()]
        new = rng.choice(
            [w for w, d in _WORD_NUMBERS.items() if d != digit and abs(int(d) - int(digit)) <= 5]
        )
        options.append(
            (match.start(), match.end(), new if match.group().islower() else upper_first(new))
        )
    for match in _MONTH.finditer(sentence):
        new = rng.choice([m for m in _MONTH_NAMES if m != match.group()])
        options.append((match.start(), match.end(), new))
    if not options:
        return None
    start, end, new = rng.choice(options)
    if rng.random() < 0.3:  # a value the document gives for something else
        others = [
            m.group()
            for s in doc.sentences
            if s != sentence
            for m in _NUMBER.finditer(s)
            if m.group() != sentence[start:end]
            and (m.group().isdigit() == sentence[start:end].isdigit())
        ]
        if others:
            new = rng.choice(others)
    if new == sentence[start:end]:
        return None
    return sentence[:start] + new + sentence[end:]


_AUXILIARY = "is|are|was|were|has|have|had|will|would|can|could|should|must|did|does|do"
_AUXILIARIES = re.compile(rf"\b({_AUXILIARY}|may|might)\b(?! not\b)(?!n't)")
_NEGATED = re.compile(
    rf"\b(?:({_AUXILIARY}) not|(is|are|was|were|has|have|had|would|could|should|did|does|do)n't"
    r"|never)\b ?"
)
_CONTRACTED = {"will": "won't", "can": "can't"}


def negate(sentence: str, doc: Document, rng: random.Random, verbs: dict[str, str]) -> str | None:
    """The statement's polarity flipped.

    "was" -> "was not", "was not" -> "was", "agreed" -> "did not agree", or a direction
    word turned into its opposite.
    """
    flips = [
        w for w in re.findall(r"[a-z]+", sentence) if w in OPPOSITES and w not in _WEAK_OPPOSITES
    ]
    if flips and rng.random() < 0.5:
        word = rng.choice(flips)
        opposite = sorted(OPPOSITES[word])[0]
        return re.sub(rf"\b{word}\b", opposite, sentence, count=1)
    negated = _NEGATED.search(sentence)
    if negated and rng.random() < 0.7:
        auxiliary = negated.group(1) or negated.group(2)
        if auxiliary is None:  # "never"
            return sentence[: negated.start()] + sentence[negated.end() :]
        if auxiliary in ("did", "does", "do"):
            return None  # "did not agree" -> "agreed" needs the past tense
        return sentence[: negated.start()] + auxiliary + " " + sentence[negated.end() :]
    auxiliary = _AUXILIARIES.search(sentence)
    if auxiliary:
        word = auxiliary.group(1)
        if rng.random() < 0.3 and word in (
            "is",
            "are",
            "was",
            "were",
            "has",
            "have",
            "had",
            "does",
            "do",
            "did",
            "could",
            "would",
            "should",
        ):
            replacement = f"{word}n't"
        elif word in _CONTRACTED and rng.random() < 0.3:
            replacement = _CONTRACTED[word]
        else:
            replacement = f"{word} not"
        return sentence[: auxiliary.start()] + replacement + sentence[auxiliary.end() :]
    for match in re.finditer(r"\b([a-z]{3,}ed)\b", sentence):
        base = verbs.get(match.group(1))
        if base and match.start() > 0:
            return sentence[: match.start()] + f"did not {base}" + sentence[match.end() :]
    return None


_WEAK_OPPOSITES = frozenset(
    {
        "on",
        "for",
        "with",
        "up",
        "down",
        "over",
        "all",
        "long",
        "home",
        "full",
        "open",
        "start",
        "first",
        "last",
        "more",
        "most",
    }
)


def swap_entity(
    sentence: str, doc: Document, pool: list[str], rng: random.Random, in_doc: bool
) -> str | None:
    """A name replaced by another name: of the same document when ``in_doc``."""
    present = spans(sentence)
    if not present:
        return None
    target = rng.choice(present)
    words = len(target.split())
    source = doc.names if in_doc else pool
    slack = 0 if words > 1 else 1  # a one-word name may become a two-word one
    candidates = [
        n
        for n in source
        if n not in sentence and n.split()[0] not in target and abs(len(n.split()) - words) <= slack
    ]
    if not candidates:
        return None
    return sentence.replace(target, rng.choice(candidates), 1)


def swap_roles(sentence: str, rng: random.Random) -> str | None:
    """Right entities, wrong roles.

    Two names (or two parties: "the buyer", "the seller") of the sentence exchanged.
    """
    parties = [w for w in dict.fromkeys(re.findall(r"\b[a-z]+\b", sentence)) if w in ROLE_WORDS]
    if len(parties) >= 2 and rng.random() < 0.7:
        first, second = rng.sample(parties, 2)
        marker = "\x00"
        swapped = re.sub(rf"\b{first}\b", marker, sentence, count=1)
        swapped = re.sub(rf"\b{second}\b", first, swapped, count=1).replace(marker, second, 1)
        return swapped if swapped != sentence else None
    present = list(dict.fromkeys(spans(sentence)))
    present = [p for p in present if not any(p != q and p in q for q in present)]
    if len(present) < 2:
        return None
    first, second = rng.sample(present, 2)
    marker = "\x00"
    swapped = (
        sentence.replace(first, marker, 1).replace(second, first, 1).replace(marker, second, 1)
    )
    return swapped if swapped != sentence else None


def conflate(sentence: str, doc: Document, index: int, rng: random.Random) -> str | None:
    """Two things' attributes mixed.

    A value or name of this sentence replaced by the matching one of a neighbouring
    sentence of the same document.
    """
    neighbours = [
        doc.sentences[i]
        for i in range(max(0, index - 3), min(len(doc.sentences), index + 4))
        if i != index
    ]
    rng.shuffle(neighbours)
    for other in neighbours:
        mine, theirs = _NUMBER.findall(sentence), _NUMBER.findall(other)
        if mine and theirs:
            old = "".join(rng.choice(mine))
            new = "".join(rng.choice(theirs))
            if old != new and new not in sentence:
                return re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w])", new, sentence, count=1)
        my_names, their_names = spans(sentence), [n for n in spans(other) if n not in sentence]
        if my_names and their_names:
            return sentence.replace(rng.choice(my_names), rng.choice(their_names), 1)
    return None


def transplant(sentence: str, doc: Document, rng: random.Random) -> str:
    """Another document's sentence made to look on topic: its names become this one's."""
    out = sentence
    for name in spans(sentence):
        if doc.names and rng.random() < 0.8:
            out = out.replace(name, rng.choice(doc.names), 1)
    return out


# ---------------------------------------------------------------- prose cases

_SHORT_SHARE = 0.14
"""Prose cases answered with a bare name or number, as a QA system answers."""
_NEGATIVE = re.compile(
    r"n't\b|\b(?:not|never|no|cannot|without|failed to|unable|refused|declined to|lacks?|lacked"
    r"|unclear|unknown|unavailable|impossible|unlikely|rarely|seldom)\b"
)
_NEGATIVE_SHARE = 0.4
"""How often a factual answer starts from a negative sentence, so that negations are as
common on both sides as the contradictions that add them make them on one."""

KINDS_PROSE = {
    "factual": ["extractive", "paraphrase", "synthesis", "hedged", "multi", "numeric"],
    "hallucinated": [
        "entity_swap", "number_change", "contradiction", "wrong_relation", "conflation",
        "unsupported_addition", "fabricated",
    ],
}  # fmt: skip
_QUESTIONS = [
    "What happened with {}?", "What does the article say about {}?", "Can you tell me about {}?",
    "What do we know about {}?", "Any update on {}?", "What's the latest on {}?",
    "Could you summarise what the sources say about {}?", "What was reported about {}?",
    "Give me the key facts about {}.", "What should I know about {}?",
]  # fmt: skip

_HIGHLIGHT_KINDS = [
    "withheld", "withheld", "number_change", "contradiction", "entity_swap", "wrong_relation",
]  # fmt: skip
"""How a highlight's twin is made wrong, tried in a shuffled order until one applies."""


def _coverage(sentence: str, words: set[str]) -> float:
    """The share of the sentence's content words that ``words`` holds."""
    own = set(content_words(sentence))
    return len(own & words) / max(1, len(own))


@dataclass
class Case:
    """A generated case before it is written."""

    question: str
    contexts: list[str]
    sentences: list[str]
    labels: list[int]
    label: str
    kind: str
    domain: str
    evidence: str


class ProseMaker:
    """Cases over one document at a time; every draw comes from one seeded generator."""

    def __init__(self, documents: list[Document], rng: random.Random) -> None:
        self.documents = documents
        self.rng = rng
        self.pool = [name for doc in documents[:3000] for name in doc.names[:6]]
        vocabulary = Counter(
            w for doc in documents[:3000] for s in doc.sentences for w in re.findall(r"[a-z]+", s)
        )
        self.verbs = _past_tense_bases(vocabulary)

    def contexts(self, doc: Document, withheld: set[int]) -> list[str]:
        """The document as passages, less the withheld sentences.

        At times a distractor passage from another document joins them.
        """
        rng = self.rng
        passages = [
            " ".join(doc.sentences[i] for i in part if i not in withheld)
            for part in doc.passages(rng)
        ]
        passages = [p for p in passages if p]
        if rng.random() < 0.25:
            other = rng.choice(self.documents)
            start = rng.randrange(max(1, len(other.sentences) - 3))
            passages.insert(
                rng.randrange(len(passages) + 1), " ".join(other.sentences[start : start + 4])
            )
        return passages

    def withhold(self, doc: Document, chosen: list[int]) -> set[int]:
        """Sentences of the document left out of the contexts, for both labels alike.

        On topic, plausible and unsupported, they are what an assistant adds from memory.
        """
        rest = [i for i in range(len(doc.sentences)) if i not in chosen]
        if len(rest) < 3 or self.rng.random() < 0.35:
            return set()
        return set(self.rng.sample(rest, max(1, len(rest) // 3)))

    def make(self, doc: Document, label: str, kind: str) -> Case | None:
        rng = self.rng
        candidates = [i for i, s in enumerate(doc.sentences) if usable(s)]
        if kind == "numeric" or kind == "number_change":
            candidates = [
                i
                for i in candidates
                if _NUMBER.search(doc.sentences[i]) or _WORD_NUMBER.search(doc.sentences[i])
            ]
        if not candidates:
            return None
        style = Style.draw(rng)
        if kind == "hedged" and not style.hedge:
            style.hedge, style.frame = rng.choice(_HEDGES), None
        # Both labels draw answer lengths alike: a multi-sentence answer is as often
        # hallucinated as factual, and an added sentence takes the place of another.
        size = rng.choice([1, 1, 1, 2, 2, 3, 4])
        if kind == "multi" or (label == "hallucinated" and rng.random() < 1 / 6):
            size = max(2, size)
        if kind == "synthesis":
            size = 2
        if kind == "unsupported_addition":
            size = max(1, size - 1)
        if kind == "extractive":
            style.rate, style.reorder = 0.0, False
        if kind == "paraphrase":
            style.rate, style.reorder = max(style.rate, 0.4), True
        if kind in ("paraphrase", "synthesis", "extractive"):
            style.deep = kind != "extractive"
        elif label == "hallucinated":
            # As often as on factual answers, where two kinds of six are always deep and
            # one never: depth must not tell the labels apart.
            style.deep = rng.random() < 7 / 12
        negative = [i for i in candidates if _NEGATIVE.search(doc.sentences[i])]
        if label == "factual" and negative and rng.random() < _NEGATIVE_SHARE:
            # A contradiction often adds a "not": factual answers carry as many of them.
            first = rng.choice(negative)
        else:
            first = rng.choice(candidates)
        chosen = [first, *[i for i in candidates if i != first and abs(i - first) <= 6][: size - 1]]
        chosen = sorted(chosen) if rng.random() < 0.7 else chosen
        originals = [doc.sentences[i] for i in chosen]
        if style.deep:
            originals = [simplify(sentence, rng) for sentence in originals]
        withheld = self.withhold(doc, chosen)
        on_topic = [doc.sentences[i] for i in sorted(withheld) if usable(doc.sentences[i])]
        bad = rng.randrange(len(originals))
        labels = [0] * len(originals)
        perturbed = list(originals)
        if label == "hallucinated":
            if kind == "unsupported_addition":
                other = rng.choice(self.documents)
                extra = [s for s in other.sentences if usable(s)]
                if on_topic and rng.random() < 0.7:
                    addition = rng.choice(on_topic)
                elif extra:
                    addition = transplant(rng.choice(extra), doc, rng)
                else:
                    return None
                position = rng.randrange(1, len(perturbed) + 1)
                perturbed.insert(position, addition)
                labels.insert(position, 1)
                if len(perturbed) > 4:
                    perturbed, labels = perturbed[-4:], labels[-4:]
            elif kind == "fabricated":
                if len(on_topic) >= len(originals) and rng.random() < 0.6:
                    perturbed = rng.sample(on_topic, len(originals))
                else:
                    other = rng.choice(self.documents)
                    extra = [s for s in other.sentences if usable(s)]
                    if len(extra) < len(originals):
                        return None
                    start = rng.randrange(len(extra) - len(originals) + 1)
                    window = extra[start : start + len(originals)]
                    perturbed = [transplant(s, doc, rng) for s in window]
                labels = [1] * len(perturbed)
            else:
                changed = self.perturb(kind, originals[bad], doc, chosen[bad])
                if changed is None or changed == originals[bad]:
                    return None
                perturbed[bad] = changed
                labels[bad] = 1
        sentences = [restate(s, rng, style, index == 0) for index, s in enumerate(perturbed)]
        if (
            kind == "synthesis"
            and len(sentences) == 2
            and all(len(s.split()) < 28 for s in sentences)
        ):
            sentences = [fuse(sentences[0], sentences[1], rng)]
            labels = [max(labels)]
        if style.sign_off:
            sentences.append(style.sign_off)
            labels.append(0)
        if any(len(split_sentences(s)) != 1 for s in sentences):
            return None
        question = self.question(doc, originals[0])
        if question is None:
            return None
        return Case(
            question,
            self.contexts(doc, withheld),
            sentences,
            labels,
            label,
            kind,
            doc.domain,
            "prose",
        )

    def question(self, doc: Document, sentence: str) -> str | None:
        """A question about the longest name in ``sentence``, or the document's first name."""
        found = sorted(spans(sentence), key=lambda n: -len(n.split()))
        topic = found[0] if found else (doc.names[0] if doc.names else None)
        return None if topic is None else self.rng.choice(_QUESTIONS).format(topic)

    def short(self, doc: Document, label: str) -> Case | None:
        """A bare answer to a question asked of one sentence, right or swapped.

        A name or a number ("Who ...?" "Brice Robin"), or another of the same kind.
        """
        rng = self.rng
        candidates = [s for s in doc.sentences if usable(s)]
        if not candidates:
            return None
        sentence = rng.choice(candidates)
        names_ = [
            (m.start(), m.end(), m.group())
            for n in spans(sentence)
            for m in [re.search(re.escape(n), sentence)]
            if m
        ]
        numbers = [(m.start(), m.end(), m.group()) for m in _NUMBER.finditer(sentence)]
        options = names_ + numbers
        if not options:
            return None
        start, end, answer = rng.choice(options)
        number = (start, end, answer) in numbers
        asked = "how many" if number else ("who" if len(answer.split()) == 2 else "what")
        question = upper_first(f"{sentence[:start]}{asked}{sentence[end:]}".rstrip(". ") + "?")
        kind = "short"
        if label == "hallucinated":
            kind = "short_swap"
            if number:
                answer = _new_number(answer, rng)
            else:
                # Most often another name of the same document; at times one it never
                # mentions, as when the contexts retrieved are about something else.
                pool = doc.names if rng.random() < 0.5 else self.pool
                others = [n for n in pool if n not in sentence and n.split()[0] not in answer]
                if not others:
                    return None
                answer = rng.choice(others)
        output = answer + rng.choice(["", ".", "."])
        return Case(
            question,
            self.contexts(doc, set()),
            [output],
            [int(label == "hallucinated")],
            label,
            kind,
            doc.domain,
            "prose",
        )

    def perturb(self, kind: str, sentence: str, doc: Document, index: int) -> str | None:
        rng = self.rng
        if kind == "number_change":
            return change_number(sentence, doc, rng)
        if kind == "contradiction":
            return negate(sentence, doc, rng, self.verbs)
        if kind == "entity_swap":
            return swap_entity(sentence, doc, self.pool, rng, in_doc=rng.random() < 0.7)
        if kind == "wrong_relation":
            return swap_roles(sentence, rng)
        if kind == "conflation":
            return conflate(sentence, doc, index, rng)
        raise ValueError(kind)

    def highlight_pair(self, doc: Document, summary: str) -> tuple[Case, Case] | None:
        """A summary people wrote of ``doc``, factual, and its twin with one sentence wrong.

        The sentences are deep paraphrases no template makes. The twin's wrong sentence is
        either left without support (the article sentences that hold its words withheld
        from the contexts: the same words, now unsupported) or perturbed as `make` does.
        """
        rng = self.rng
        held = [set(content_words(sentence)) for sentence in doc.sentences]
        everything = set().union(*held)
        written = [clean_sentence(s) for s in split_sentences(summary)]
        written = [
            s
            for s in written
            if 5 <= len(s.split()) <= 45
            and s.endswith(".")
            and '"' not in s
            and _coverage(s, everything) >= 0.75  # a highlight the article does not hold is dropped
        ]
        if not written:
            return None
        size = min(len(written), rng.choice([1, 2, 2, 3, 3, 4]))
        start = rng.randrange(len(written) - size + 1)
        chosen = written[start : start + size]
        question = self.question(doc, chosen[0])
        if question is None:
            return None

        def case(
            sentences: list[str], labels: list[int], kind: str, withheld: set[int]
        ) -> Case | None:
            if any(len(split_sentences(s)) != 1 for s in sentences):
                return None
            label = "hallucinated" if any(labels) else "factual"
            contexts = self.contexts(doc, withheld)
            return Case(question, contexts, sentences, labels, label, kind, doc.domain, "prose")

        factual = case(chosen, [0] * size, "highlight", set())
        if factual is None:
            return None
        bad = rng.randrange(size)
        kinds = list(_HIGHLIGHT_KINDS)
        rng.shuffle(kinds)
        for kind in kinds:
            sentences, labels, withheld = list(chosen), [0] * size, set()
            labels[bad] = 1
            if kind == "withheld":
                withheld = self.unsupport(held, chosen, bad)
                if not withheld:
                    continue
            else:
                changed = self.perturb(kind, chosen[bad], doc, 0)
                if not changed or changed == chosen[bad]:
                    continue
                sentences[bad] = changed
            twin = case(sentences, labels, f"highlight_{kind}", withheld)
            if twin is not None:
                return factual, twin
        return None

    @staticmethod
    def unsupport(held: list[set[str]], chosen: list[str], bad: int) -> set[int]:
        """Up to three article sentences whose absence leaves ``chosen[bad]`` unsupported.

        ``held``: each article sentence's content words. Empty where that takes more, or
        where another chosen sentence loses its support too.
        """
        target = chosen[bad]
        ranked = sorted(range(len(held)), key=lambda i: -_coverage(target, held[i]))
        withheld: set[int] = set()
        for index in ranked[:3]:
            withheld.add(index)
            left = set().union(*(words for i, words in enumerate(held) if i not in withheld))
            if _coverage(target, left) <= 0.5:
                break
        else:
            return set()
        if any(_coverage(s, left) < 0.7 for i, s in enumerate(chosen) if i != bad):
            return set()
        return withheld


def _past_tense_bases(vocabulary: Counter[str]) -> dict[str, str]:
    """Past tenses ending in -ed whose base form the corpus also uses: "agreed" -> "agree"."""
    bases = {}
    for word in vocabulary:
        if not word.endswith("ed") or len(word) < 5:
            continue
        for base in (
            word[:-1],
            word[:-2],
            word[:-3] if word[-3] == word[-4] else "",
            word[:-3] + "y" if word.endswith("ied") else "",
        ):
            if base and vocabulary.get(base, 0) >= 3:
                bases[word] = base
                break
    return bases


# ---------------------------------------------------------------- tool output

_FIRST = """Ana Lena Omar Priya Tomas Sofia Mateo Yuki Chen Amara Lars Ines Kofi Nadia Ravi
    Elena Jonas Mira Felix Zara Hugo Leila Arjun Nora""".split()
_LAST = """Ruiz Okafor Lindqvist Tanaka Moreau Haddad Novak Costa Mensah Petrov Brennan Alvarez
    Schmidt Kowalski Duarte Nakamura Osei Varga Keller Rossi""".split()
_CITIES = (
    "Lyon Porto Leeds Kraków Malmö Bilbao Ghent Tampere Graz Utrecht Cork Turin Brno Aarhus".split()
)
_CARRIERS = ["DHL", "UPS", "FedEx", "DPD", "GLS", "Royal Mail"]
_PRODUCTS = [
    "standing desk",
    "espresso grinder",
    "trail shoes",
    "monitor arm",
    "air purifier",
    "backpack",
    "kettle",
    "desk lamp",
    "headphones",
    "yoga mat",
]


def _person(rng: random.Random) -> str:
    return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"


def _date(rng: random.Random) -> tuple[str, str, str]:
    """An ISO date and two ways an answer writes it."""
    month, day = rng.randrange(1, 13), rng.randrange(1, 29)
    year = rng.choice([2024, 2025, 2026])
    name = _MONTH_NAMES[month - 1]
    return f"{year}-{month:02d}-{day:02d}", f"{day} {name}", f"{name} {day}, {year}"


@dataclass
class ToolField:
    """One field of a record: its key, value, and how an answer says it."""

    key: str
    value: Any
    say: Callable[[Any], str]
    alternatives: Callable[[random.Random], Any]
    """Another plausible value (for a flipped status or a changed number)."""
    nullable: bool = False


@dataclass
class ToolRecord:
    subject: str
    """How the answer names the record ("Order 4821")."""
    fields: dict[str, ToolField]

    def json(self) -> dict[str, Any]:
        return {key: f.value for key, f in self.fields.items()}


def _money(rng: random.Random) -> float:
    return round(rng.uniform(5, 900), 2)


def make_order(rng: random.Random) -> ToolRecord:
    number = rng.randrange(1000, 99999)
    status = rng.choice(["shipped", "delivered", "pending", "cancelled", "processing"])
    iso, _day_month, _ = _date(rng)
    tracking = (
        None
        if status in ("pending", "processing", "cancelled") or rng.random() < 0.2
        else f"{rng.choice(['1Z', 'JD', 'TRK'])}{rng.randrange(10**7, 10**8)}"
    )
    statuses = {
        "shipped": "was shipped",
        "delivered": "was delivered",
        "pending": "is still pending",
        "cancelled": "was cancelled",
        "processing": "is being processed",
    }
    return ToolRecord(
        f"order {number}",
        {
            "order_id": ToolField(
                "order_id", number, lambda v: f"order {v}", lambda r: r.randrange(1000, 99999)
            ),
            "status": ToolField(
                "status", status, lambda v: statuses[v], lambda r: r.choice(list(statuses))
            ),
            "total": ToolField("total", _money(rng), lambda v: f"the total is {v:.2f} EUR", _money),
            "items": ToolField(
                "items",
                rng.randrange(1, 6),
                lambda v: f"it contains {v} item{'s' if v != 1 else ''}",
                lambda r: r.randrange(1, 9),
            ),
            "carrier": ToolField(
                "carrier",
                rng.choice(_CARRIERS),
                lambda v: f"it is going with {v}",
                lambda r: r.choice(_CARRIERS),
            ),
            "tracking_number": ToolField(
                "tracking_number",
                tracking,
                lambda v: f"the tracking number is {v}" if v else "there is no tracking number yet",
                lambda r: f"1Z{r.randrange(10**7, 10**8)}",
                nullable=True,
            ),
            "updated": ToolField(
                "updated",
                iso,
                lambda v: f"it was last updated on {_spoken_date(v)}",
                lambda r: _date(r)[0],
            ),
            "customer": ToolField(
                "customer", _person(rng), lambda v: f"it was placed by {v}", _person
            ),
        },
    )


def make_flight(rng: random.Random) -> ToolRecord:
    code = f"{rng.choice(['LH', 'AF', 'KL', 'IB', 'SK', 'AY', 'TP'])}{rng.randrange(100, 9999)}"
    status = rng.choice(["on time", "delayed", "boarding", "cancelled", "landed"])
    delay = rng.choice([15, 20, 35, 45, 60, 90, 120]) if status == "delayed" else 0
    hour, minute = rng.randrange(5, 23), rng.choice([0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55])
    gate = (
        None
        if status == "cancelled" or rng.random() < 0.2
        else f"{rng.choice('ABCDE')}{rng.randrange(1, 60)}"
    )
    return ToolRecord(
        f"flight {code}",
        {
            "flight": ToolField(
                "flight", code, lambda v: f"flight {v}", lambda r: f"LH{r.randrange(100, 9999)}"
            ),
            "status": ToolField(
                "status",
                status,
                lambda v: f"it is {v}",
                lambda r: r.choice(["on time", "delayed", "boarding", "cancelled", "landed"]),
            ),
            "departure_time": ToolField(
                "departure_time",
                f"{hour:02d}:{minute:02d}",
                lambda v: f"it departs at {v}",
                lambda r: f"{r.randrange(5, 23):02d}:{r.choice([0, 15, 30, 45]):02d}",
            ),
            "gate": ToolField(
                "gate",
                gate,
                lambda v: f"it leaves from gate {v}" if v else "no gate has been assigned yet",
                lambda r: f"{r.choice('ABCDE')}{r.randrange(1, 60)}",
                nullable=True,
            ),
            "delay_minutes": ToolField(
                "delay_minutes",
                delay,
                lambda v: f"the delay is {v} minutes" if v else "there is no delay",
                lambda r: r.choice([10, 25, 40, 75, 100]),
            ),
            "destination": ToolField(
                "destination",
                rng.choice(_CITIES),
                lambda v: f"it flies to {v}",
                lambda r: r.choice(_CITIES),
            ),
            "seats_left": ToolField(
                "seats_left",
                rng.randrange(0, 40),
                lambda v: f"{v} seats are left",
                lambda r: r.randrange(0, 60),
            ),
        },
    )


def make_ticket(rng: random.Random) -> ToolRecord:
    number = rng.randrange(10000, 99999)
    status = rng.choice(["open", "in progress", "waiting on customer", "resolved", "closed"])
    iso, _, _ = _date(rng)
    return ToolRecord(
        f"ticket {number}",
        {
            "ticket_id": ToolField(
                "ticket_id", number, lambda v: f"ticket {v}", lambda r: r.randrange(10000, 99999)
            ),
            "status": ToolField(
                "status",
                status,
                lambda v: f"it is {v}",
                lambda r: r.choice(
                    ["open", "in progress", "waiting on customer", "resolved", "closed"]
                ),
            ),
            "priority": ToolField(
                "priority",
                rng.choice(["low", "normal", "high", "urgent"]),
                lambda v: f"its priority is {v}",
                lambda r: r.choice(["low", "normal", "high", "urgent"]),
            ),
            "assignee": ToolField(
                "assignee",
                None if rng.random() < 0.25 else _person(rng),
                lambda v: f"it is assigned to {v}" if v else "nobody has been assigned to it yet",
                _person,
                nullable=True,
            ),
            "opened": ToolField(
                "opened",
                iso,
                lambda v: f"it was opened on {_spoken_date(v)}",
                lambda r: _date(r)[0],
            ),
            "replies": ToolField(
                "replies",
                rng.randrange(0, 12),
                lambda v: f"it has {v} replies",
                lambda r: r.randrange(0, 15),
            ),
            "sla_breached": ToolField(
                "sla_breached",
                rng.random() < 0.3,
                lambda v: "the SLA has been breached" if v else "the SLA has not been breached",
                lambda r: r.random() < 0.5,
            ),
        },
    )


def make_account(rng: random.Random) -> ToolRecord:
    stem = rng.choice(
        "Nordwind Bluefern Corvus Halden Pellucid Quarry Sable Tessel Umbra Verity".split()
    )
    company = f"{stem} {rng.choice(['Logistics', 'Labs', 'Foods', 'Health', 'Media', 'Systems'])}"
    iso, _, _ = _date(rng)
    return ToolRecord(
        company,
        {
            "account": ToolField("account", company, lambda v: v, lambda r: "Corvus Media"),
            "plan": ToolField(
                "plan",
                rng.choice(["starter", "team", "business", "enterprise"]),
                lambda v: f"it is on the {v} plan",
                lambda r: r.choice(["starter", "team", "business", "enterprise"]),
            ),
            "seats": ToolField(
                "seats",
                rng.randrange(3, 400),
                lambda v: f"it has {v} seats",
                lambda r: r.randrange(3, 500),
            ),
            "owner": ToolField(
                "owner", _person(rng), lambda v: f"the account owner is {v}", _person
            ),
            "renewal_date": ToolField(
                "renewal_date",
                iso,
                lambda v: f"it renews on {_spoken_date(v)}",
                lambda r: _date(r)[0],
            ),
            "arr": ToolField(
                "arr",
                rng.randrange(2, 900) * 1000,
                lambda v: f"its annual recurring revenue is {v:,} dollars",
                lambda r: r.randrange(2, 900) * 1000,
            ),
            "churn_risk": ToolField(
                "churn_risk",
                rng.choice(["low", "medium", "high"]),
                lambda v: f"its churn risk is {v}",
                lambda r: r.choice(["low", "medium", "high"]),
            ),
            "open_opportunity": ToolField(
                "open_opportunity",
                None if rng.random() < 0.4 else f"{rng.randrange(5, 80)} extra seats",
                lambda v: (
                    f"there is an open opportunity for {v}" if v else "there is no open opportunity"
                ),
                lambda r: f"{r.randrange(5, 80)} extra seats",
                nullable=True,
            ),
        },
    )


def make_service(rng: random.Random) -> ToolRecord:
    stem = rng.choice(["checkout", "search", "auth", "billing", "inventory", "notifications"])
    name = f"{stem}-{rng.choice(['api', 'svc', 'worker'])}"
    state = rng.choice(["healthy", "degraded", "down"])
    return ToolRecord(
        name,
        {
            "service": ToolField("service", name, lambda v: v, lambda r: "search-api"),
            "state": ToolField(
                "state",
                state,
                lambda v: f"it is {v}",
                lambda r: r.choice(["healthy", "degraded", "down"]),
            ),
            "error_rate_percent": ToolField(
                "error_rate_percent",
                round(rng.uniform(0, 12), 1),
                lambda v: f"its error rate is {v}%",
                lambda r: round(r.uniform(0, 12), 1),
            ),
            "p95_latency_ms": ToolField(
                "p95_latency_ms",
                rng.randrange(40, 2400),
                lambda v: f"its p95 latency is {v} ms",
                lambda r: r.randrange(40, 2400),
            ),
            "open_incidents": ToolField(
                "open_incidents",
                rng.randrange(0, 4),
                lambda v: f"it has {v} open incident{'s' if v != 1 else ''}",
                lambda r: r.randrange(0, 5),
            ),
            "last_deploy": ToolField(
                "last_deploy",
                _date(rng)[0],
                lambda v: f"it was last deployed on {_spoken_date(v)}",
                lambda r: _date(r)[0],
            ),
            "on_call": ToolField("on_call", _person(rng), lambda v: f"{v} is on call", _person),
        },
    )


def make_invoice(rng: random.Random) -> ToolRecord:
    number = f"INV-{rng.randrange(10000, 99999)}"
    status = rng.choice(["paid", "unpaid", "overdue", "refunded"])
    return ToolRecord(
        f"invoice {number}",
        {
            "invoice": ToolField(
                "invoice",
                number,
                lambda v: f"invoice {v}",
                lambda r: f"INV-{r.randrange(10000, 99999)}",
            ),
            "status": ToolField(
                "status",
                status,
                lambda v: f"it is {v}",
                lambda r: r.choice(["paid", "unpaid", "overdue", "refunded"]),
            ),
            "amount": ToolField(
                "amount", _money(rng), lambda v: f"the amount is {v:.2f} dollars", _money
            ),
            "due_date": ToolField(
                "due_date",
                _date(rng)[0],
                lambda v: f"it is due on {_spoken_date(v)}",
                lambda r: _date(r)[0],
            ),
            "paid_on": ToolField(
                "paid_on",
                _date(rng)[0] if status == "paid" else None,
                lambda v: (
                    f"it was paid on {_spoken_date(v)}" if v else "no payment has been recorded"
                ),
                lambda r: _date(r)[0],
                nullable=True,
            ),
            "product": ToolField(
                "product",
                rng.choice(_PRODUCTS),
                lambda v: f"it is for a {v}",
                lambda r: r.choice(_PRODUCTS),
            ),
        },
    )


TOOL_DOMAINS: dict[str, Callable[[random.Random], ToolRecord]] = {
    "orders": make_order, "flights": make_flight, "tickets": make_ticket, "crm": make_account,
    "monitoring": make_service, "billing": make_invoice,
}  # fmt: skip


def _spoken_date(iso: str) -> str:
    year, month, day = (int(part) for part in iso.split("-"))
    return f"{day} {_MONTH_NAMES[month - 1]} {year}"


def _render(records: list[ToolRecord], rng: random.Random, domain: str) -> str:
    """Tool output as assistants receive it.

    JSON (one record, a list, nested; compact or pretty; alone or after the call that
    produced it), a pipe table, ``key: value`` lines, or one line of fields.
    """
    values = [r.json() for r in records]
    shown = {k: ("null" if v is None else str(v)) for k, v in values[0].items()}
    roll = rng.random()
    if roll < 0.12 and len(values) > 1:
        header = list(values[0])
        rows = [" | ".join("" if v is None else str(v) for v in value.values()) for value in values]
        text = "\n".join([" | ".join(header), *rows])
    elif roll < 0.2 and len(values) == 1:
        text = "\n".join(f"{k}: {v}" for k, v in shown.items())
    elif roll < 0.3:
        lines = []
        for value in values:
            first, *rest = value.items()
            fields = "; ".join(f"{k}: {'none' if v is None else v}" for k, v in rest)
            lines.append(f"{first[1]} — {fields}")
        text = "\n".join(lines)
    else:
        body: Any = (
            values[0]
            if len(values) == 1 and rng.random() < 0.6
            else {"count": len(values), "results": values}
        )
        if rng.random() < 0.3 and len(values) == 1 and isinstance(body, dict):
            record = dict(values[0])
            nested_keys = [k for k in record if k != "status"][-3:]
            body = {
                **{k: v for k, v in record.items() if k not in nested_keys},
                "details": {k: record[k] for k in nested_keys},
            }
        text = json.dumps(body, indent=2 if rng.random() < 0.5 else None)
    if rng.random() < 0.4:
        call = rng.choice([f"{domain}.get()", f"{domain}.search()", f"get_{domain}()"])
        text = rng.choice([f"{call} ->\n", f"Tool result ({call.rstrip('()')}):\n"]) + text
    return text


def _stamped(text: str, minutes: int) -> str:
    return f"[{minutes // 60:02d}:{minutes % 60:02d}] {text}"


def count_case(rng: random.Random, label: str) -> Case | None:
    """A list counted ("2 of the 4 orders are pending: order 4821 and order 4822")."""
    domain = rng.choice(list(TOOL_DOMAINS))
    records = [TOOL_DOMAINS[domain](rng) for _ in range(rng.randrange(3, 6))]
    key = next((k for k in ("status", "state", "plan", "priority") if k in records[0].fields), None)
    if key is None:
        return None
    values = [r.fields[key].value for r in records]
    value = rng.choice(values)
    matching = [r.subject for r, v in zip(records, values, strict=True) if v == value]
    count, total = len(matching), len(records)
    kind = "list_count"
    if label == "hallucinated":
        kind = rng.choice(["count_change", "wrong_record"])
        if kind == "count_change":
            count = rng.choice([c for c in range(1, total + 1) if c != count])
        else:
            others = [r.subject for r, v in zip(records, values, strict=True) if v != value]
            if not others:
                return None
            matching[rng.randrange(len(matching))] = rng.choice(others)
    said = str(count) if rng.random() < 0.5 else _NUMBER_WORDS.get(str(count), str(count))
    named = (
        " and ".join(matching)
        if len(matching) <= 3
        else f"{', '.join(matching[:-1])} and {matching[-1]}"
    )
    sentence = rng.choice([
        f"{upper_first(said)} of the {total} {domain} records are {value}: {named}.",
        f"Out of {total} results, {said} are {value} ({named}).",
    ])  # fmt: skip
    question = rng.choice([f"Which {domain} records are {value}?", f"How many are {value}?"])
    return Case(
        question,
        [_render(records, rng, domain)],
        [sentence],
        [int(label == "hallucinated")],
        label,
        kind,
        domain,
        "tool",
    )


def tool_case(rng: random.Random, label: str) -> Case | None:
    domain = rng.choice(list(TOOL_DOMAINS))
    make = TOOL_DOMAINS[domain]
    kind_roll = rng.random()
    count = 1 if kind_roll < 0.45 else rng.randrange(2, 5)
    records = [make(rng) for _ in range(count)]
    target = rng.choice(records)
    keys = [k for k in target.fields if k != next(iter(target.fields))]
    chosen = rng.sample(keys, min(len(keys), rng.choice([1, 2, 2, 3])))
    nulls = [k for k in keys if target.fields[k].value is None and k not in chosen]
    if nulls and rng.random() < 0.6:  # what the tool did not return is asked about often
        chosen[rng.randrange(len(chosen))] = rng.choice(nulls)
    superseded = count == 1 and rng.random() < 0.45
    contexts: list[str]
    earlier: ToolRecord | None = None
    if superseded:
        earlier = ToolRecord(
            target.subject,
            {
                k: ToolField(f.key, f.value, f.say, f.alternatives, f.nullable)
                for k, f in target.fields.items()
            },
        )
        key = rng.choice(chosen)
        old = target.fields[key].alternatives(rng)
        if old == target.fields[key].value:
            return None
        earlier.fields[key].value = old
        first_ts, second_ts = sorted(rng.sample(range(8 * 60, 18 * 60), 2))
        contexts = [
            _stamped(_render([earlier], rng, domain), first_ts),
            _stamped(_render(records, rng, domain), second_ts),
        ]
    else:
        contexts = [_render(records, rng, domain)]
    clauses = [target.fields[k].say(target.fields[k].value) for k in chosen]
    labels_per_clause = [0] * len(clauses)
    kind = "field_readout" if len(chosen) == 1 else "fields_combined"
    if superseded:
        kind = "latest_result"
    if label == "hallucinated":
        nulls_chosen = [i for i, k in enumerate(chosen) if target.fields[k].value is None]
        index = (
            rng.choice(nulls_chosen)
            if nulls_chosen and rng.random() < 0.7
            else rng.randrange(len(chosen))
        )
        field_ = target.fields[chosen[index]]
        options = []
        others = [r for r in records if r is not target]
        if others:
            options.append("wrong_record")
        if field_.value is None and field_.nullable:
            options.append("null_filled")
        if (
            superseded
            and earlier is not None
            and earlier.fields[chosen[index]].value != field_.value
        ):
            options.append("superseded")
        options += [
            "status_flip"
            if chosen[index] in ("status", "state", "plan", "priority")
            else "value_change"
        ]
        kind = rng.choice(options)
        if kind == "wrong_record":
            value = rng.choice(others).fields[chosen[index]].value
        elif kind == "superseded" and earlier is not None:
            value = earlier.fields[chosen[index]].value
        else:
            value = field_.alternatives(rng)
            if kind == "null_filled":
                while value is None:
                    value = field_.alternatives(rng)
        if value == field_.value:
            return None
        clauses[index] = field_.say(value)
        labels_per_clause[index] = 1
    subject = upper_first(target.subject)
    opener = rng.choice(
        [f"{subject}: ", f"For {target.subject}, ", f"I checked {target.subject}: ", ""]
    )
    sentences: list[str] = []
    labels: list[int] = []
    if rng.random() < 0.5 or len(clauses) == 1:
        sentences = [
            upper_first(
                opener + " and ".join(clauses)
                if opener
                else f"{subject}: " + ", and ".join(clauses)
            )
            + "."
        ]
        labels = [max(labels_per_clause)]
    else:
        for position, (clause, bad) in enumerate(zip(clauses, labels_per_clause, strict=True)):
            text = (opener + clause) if position == 0 else clause
            sentences.append(
                upper_first(text if position == 0 or rng.random() < 0.5 else f"Also, {clause}")
                + "."
            )
            labels.append(bad)
    question = rng.choice([
        f"What's the status of {target.subject}?", f"Can you check {target.subject} for me?",
        f"What do we have on {target.subject}?", f"Any news on {target.subject}?",
        f"Look up {target.subject}.", f"What does the system say about {target.subject}?",
    ])  # fmt: skip
    if any(len(split_sentences(s)) != 1 for s in sentences):
        return None
    return Case(question, contexts, sentences, labels, label, kind, domain, "tool")


# ---------------------------------------------------------------- output


def cases(
    documents: list[Document], count: int, tool_share: float, rng: random.Random
) -> Iterator[Case]:
    maker = ProseMaker(documents, rng)
    made = 0
    while made < count:
        label = "hallucinated" if made % 2 else "factual"
        if rng.random() < tool_share:
            case = count_case(rng, label) if rng.random() < 0.15 else tool_case(rng, label)
        elif rng.random() < _SHORT_SHARE:
            case = maker.short(rng.choice(documents), label)
        else:
            case = maker.make(rng.choice(documents), label, rng.choice(KINDS_PROSE[label]))
        if case is not None:
            made += 1
            yield case


def highlight_cases(
    data: Path, documents: list[Document], count: int, rng: random.Random
) -> Iterator[Case]:
    """Pairs of `ProseMaker.highlight_pair`, ``count`` cases in all.

    From the right summaries of HaluEval's summarization train file whose article is one
    of ``documents``.
    """
    maker = ProseMaker(documents, rng)
    by_key = {doc.key: doc for doc in documents}
    made = 0
    path = data / "halueval_summarization_train.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if made >= count:
                return
            record = json.loads(line)
            if record["hallucinated"]:
                continue
            doc = by_key.get(document_key(" ".join(record["contexts"])))
            pair = maker.highlight_pair(doc, record["output"]) if doc is not None else None
            if pair is not None:
                made += 2
                yield from pair


def write(path: Path, produced: Iterator[Case], prefix: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    with path.open("w", encoding="utf-8") as handle:
        for index, case in enumerate(produced):
            counts[f"{case.label}/{case.evidence}/{case.kind}"] += 1
            record = {
                "id": f"{prefix}-{index}",
                "input": case.question,
                "contexts": case.contexts,
                "output": " ".join(case.sentences),
                "label": case.label,
                "kind": case.kind,
                "domain": case.domain,
                "evidence": case.evidence,
                "sentence_labels": case.labels,
            }
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="the shared data directory")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--train", type=int, default=40000, help="training cases")
    parser.add_argument("--tune", type=int, default=3000, help="tuning cases")
    parser.add_argument("--tool-share", type=float, default=0.35)
    parser.add_argument("--seed", type=int, default=1, help="seeds the cases")
    parser.add_argument(
        "--highlights",
        type=int,
        default=0,
        help="training cases written by people (CNN/Daily Mail highlights and their twins), "
        "after the --train ones",
    )
    parser.add_argument("--highlights-seed", type=int, default=77, help="seeds those cases")
    parser.add_argument(
        "--split-seed",
        type=int,
        default=None,
        help="seeds the tune/train split of the "
        "documents (default: --seed); keep it when regenerating for a model already trained",
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)
    documents = load_documents(args.data)
    random.Random(args.seed if args.split_seed is None else args.split_seed).shuffle(documents)
    cut = len(documents) // 10
    args.out.mkdir(parents=True, exist_ok=True)
    for name, docs, count in (
        ("tune", documents[:cut], args.tune),
        ("train", documents[cut:], args.train),
    ):
        produced = cases(docs, count, args.tool_share, rng)
        if name == "train" and args.highlights:
            people = random.Random(args.highlights_seed)
            produced = itertools.chain(
                produced, highlight_cases(args.data, docs, args.highlights, people)
            )
        counts = write(args.out / f"{name}.jsonl", produced, name)
        print(f"{name}: {sum(counts.values())} cases from {len(docs)} documents")
        for key, value in sorted(counts.items()):
            print(f"  {key}: {value}")


if __name__ == "__main__":
    main()
