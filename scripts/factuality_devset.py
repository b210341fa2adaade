#!/usr/bin/env python3
"""Held-out dev set for LocalFactuality: production-style answers over prose and tool output.

    python scripts/factuality_devset.py --data ../shared/data --out /tmp/devset.jsonl \
        [--seed 13] [--check]

Writes one JSON object per line with the fields of ``realistic_dev.jsonl`` (``id``, ``input``,
``contexts``, ``output``, ``label``, ``kind``, ``domain``) plus ``evidence`` (``prose`` or
``tool``): 420 prose and 280 tool-output cases, half of each hallucinated. The generator is
independent of the training-data generator on purpose (its own framings, templates and
perturbations), so that the model is measured on text unlike what it was fitted on.

Prose cases take their documents, and only their documents, from the HaluEval *dev* files:
Wikipedia paragraphs (QA task), CNN/DailyMail articles (summarization task) and the knowledge
triples of the dialogue task, written out as short sentences. The HaluEval answers are never
read. A case shows 1-4 passages (sometimes with a distractor passage of a similar document)
and a fluent answer of 1-4 sentences.

How the label is kept out of the answer's style:

- Every case starts from an answer plan drawn the same way whatever its label: which context
  sentences, how many, fused into one or not, paraphrased or not, hedged or not, with which
  opener and closer. Both labels get exactly the same mix of plan kinds (extractive,
  paraphrase, synthesis, hedged, multi, numeric), and both pass the same filter (at least one
  hallucination kind must apply), so the plans behind the two labels are alike.
- A hallucinated case then gets exactly one wrong sentence or clause: entity_swap,
  number_change, contradiction, wrong_relation, conflation, unsupported_addition or
  fabricated. Unsupported sentences are sentences of the same document that the contexts
  leave out (what a model adds from memory), else sentences of a similar document with the
  contexts' names put in, always about as long as the sentence they replace.
- Words that perturbations add or remove are balanced: antonyms are listed both ways, and
  negations inserted and removed are kept even.

``--check`` measures the result with an answer-only TF-IDF classifier (logistic regression
and naive Bayes, 5-fold cross-validated, numpy) and an answer-length threshold: both must stay
at or below 0.60 balanced accuracy, overall and per evidence type (the exit status is 1
otherwise). It also prints a word-overlap baseline for information, and sample cases.

Tool-output cases (invented records: orders, flights, tickets, ...) come from
``factuality_devset_tools.py``. Dependencies: the Python standard library; ``--check`` also
needs numpy. The output is a function of ``--seed`` alone.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import factuality_devset_tools as tools

FACTUAL = "factual"
HALLUCINATED = "hallucinated"

# ---------------------------------------------------------------------------------------------
# Lexicons
# ---------------------------------------------------------------------------------------------

FIRST_NAMES = frozenset(
    """
    aaron abdul abigail adam adrian ahmed aidan alan albert alex alexander alexandra alfred ali
    alice alicia allen alison amanda amber amy andrea andrew andy angela angelina ann anna anne
    annie anthony antonio arthur ashley barack barbara barry ben benjamin bernard bernie beth
    betty bill billy bob bobby brad bradley brandon brenda brendan brian bruce bryan caitlin
    calvin cameron carl carla carlos carol caroline carolyn catherine charles charlie charlotte
    chelsea cheryl chris christian christina christine christopher chuck cindy claire clara
    claude colin connor craig cristiano dale dan daniel danielle danny darren dave david dean
    debbie deborah dennis derek diana diane dick dominic don donald donna doris dorothy doug
    douglas dylan ed eddie edward elaine eleanor elizabeth ella ellen emily emma eric erik erin
    ethan eugene eva evan felix fernando frances francis frank fred frederick gabriel gareth
    gary gavin george georgia gerald gordon grace graham greg gregory hannah harold harriet
    harry heather helen henri henry hillary holly howard hugh hugo ian isaac isabel jack jackie
    jacob jake james jamie jan jane janet jason jean jeff jeffrey jennifer jenny jeremy jerry
    jesse jessica jim jimmy joan joe joel john johnny jon jonathan jordan jose joseph josh
    joshua joy joyce juan judith judy julia julian julie justin karen kate katherine kathleen
    kathryn katie keith kelly ken kenneth kevin kim kimberly kirk kristen kyle larry laura
    lauren lawrence leah lee leo leon leonard lewis liam lily linda lionel lisa lloyd louis
    louise lucas lucy luis luke lynn madeleine maria marie marilyn mario mark martha martin
    mary matt matthew maureen max megan melanie melissa michael michelle mick mike miles
    mitchell mohamed mohammed monica morgan muhammad nancy natalie nathan neil nicholas nick
    nicola nicole nigel noah norman oliver olivia oscar owen pamela pat patricia patrick paul
    paula pedro peggy penny peter phil philip phillip pierre rachel ralph randy ray raymond
    rebecca richard rick rob robert roberto robin roger ron ronald rose ross roy ruby russell
    ruth ryan sally sam samantha samuel sandra sara sarah scott sean sebastian serena sharon
    shaun sheila shirley simon sophie stanley stephanie stephen steve steven stuart susan
    suzanne sylvia tara ted teresa terry theresa thomas tim timothy tina todd tom tommy tony
    tracy travis trevor tyler valerie vanessa vicky victor victoria vincent virginia walter
    wayne wendy wesley william willie yvonne zach zoe
    """.split()
)

TITLES = frozenset(
    """
    mr mr. mrs mrs. ms ms. dr dr. sir dame lord lady president senator sen. rep. governor gov.
    judge justice prince princess king queen pope captain coach manager chancellor minister
    secretary general sergeant officer detective professor prof. rev. father sister brother
    actor actress singer rapper striker midfielder defender goalkeeper chairman director
    mayor spokesman spokeswoman
    """.split()
)

LOCATIONS = frozenset(
    """
    afghanistan africa alabama alaska albania algeria america amsterdam angola argentina
    arizona arkansas asia athens atlanta australia austria baghdad bahrain baltimore bangkok
    bangladesh barcelona beijing beirut belfast belgium berlin birmingham bolivia boston brazil
    brighton bristol britain brussels budapest bulgaria cairo california cambodia cameroon
    canada cardiff chicago chile china cleveland colombia colorado connecticut croatia cuba
    cyprus dallas damascus delaware denmark denver detroit dubai dublin edinburgh egypt england
    ethiopia europe finland florida france frankfurt geneva georgia germany ghana glasgow greece
    hawaii houston hungary idaho illinois india indiana indonesia iowa iran iraq ireland israel
    istanbul italy jakarta jamaica japan jerusalem jordan kabul kansas kentucky kenya korea
    kuwait lagos lebanon leeds libya lisbon liverpool london louisiana madrid maine malaysia
    manchester maryland massachusetts melbourne mexico miami michigan milan minnesota
    mississippi missouri montana moscow mumbai munich nairobi nebraska nepal netherlands nevada
    newcastle nigeria norway ohio oklahoma oregon oslo ottawa oxford pakistan palestine paris
    pennsylvania peru philadelphia philippines phoenix poland portugal prague qatar rome russia
    scotland seattle senegal seoul serbia singapore somalia spain stockholm sudan sweden
    switzerland sydney syria taiwan tehran tennessee texas thailand tokyo toronto tunisia
    turkey uganda ukraine utah venezuela vermont vienna vietnam virginia wales warsaw
    washington wisconsin yemen zimbabwe
    """.split()
)

NATIONALITIES = frozenset(
    """
    afghan african american argentine argentinian asian australian austrian belgian brazilian
    british canadian chilean chinese colombian cuban czech danish dutch egyptian english
    european filipino finnish french german greek hungarian indian indonesian iranian iraqi
    irish israeli italian jamaican japanese kenyan korean lebanese libyan mexican moroccan
    nigerian norwegian pakistani palestinian peruvian polish portuguese romanian russian saudi
    scottish serbian somali spanish swedish swiss syrian thai turkish ukrainian venezuelan
    vietnamese welsh
    """.split()
)

ORG_WORDS = frozenset(
    """
    academy agency airlines airways association authority bank bbc board bureau church city
    club co. college commission committee company corp corp. corporation council court
    department fc federation foundation fund group hospital inc inc. institute league ltd
    ministry museum network news nfl nba office organisation organization parliament party
    police press records school service society studios tribunal trust union united
    university house senate congress assembly army navy brotherhood
    """.split()
)

MULTIWORD_LOCATIONS = frozenset(
    [
        "united states",
        "united kingdom",
        "north carolina",
        "south carolina",
        "new york",
        "new jersey",
        "new mexico",
        "new hampshire",
        "south africa",
        "north america",
        "south america",
        "latin america",
        "new zealand",
        "hong kong",
        "los angeles",
        "san francisco",
        "san diego",
        "las vegas",
        "new orleans",
        "saudi arabia",
        "north korea",
        "south korea",
        "sri lanka",
        "costa rica",
        "puerto rico",
        "west virginia",
        "rhode island",
        "north dakota",
        "south dakota",
        "great britain",
        "northern ireland",
        "new delhi",
        "rio de janeiro",
        "buenos aires",
        "cape town",
        "tel aviv",
        "abu dhabi",
        "st. louis",
        "salt lake city",
        "kansas city",
        "mexico city",
        "new south wales",
        "west bank",
        "middle east",
        "east london",
        "south london",
        "north london",
        "west london",
    ]
)

MONTHS = (
    "January February March April May June July August September October November December"
).split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()

# Capitalised words that start sentences without naming anything.
COMMON_CAPS = frozenset(
    """
    a about according after again all also although an and another any as at because before
    being both but by can despite did do during each either even every following for from
    further had has have having he her here hers him his how however i if in instead into is
    it its just last later many meanwhile more most much my neither no none nor not now of on
    once one only or other others our over since so some such than that the their them then
    there these they this those though through thus to today under unlike until up upon
    we were what when where whether which while who whom whose why will with within without
    yesterday yet you your police officials authorities investigators officers witnesses
    researchers scientists experts doctors prosecutors critics fans residents students
    workers members parents people some several both two three four five six seven eight
    nine ten first second third new old former new
    """.split()
)

PRONOUN_STARTS = frozenset(
    "he she it they his her its their this that these those him them we i you there because"
    " such both".split()
)
LEADING_CONNECTIVES = (
    "But ",
    "And ",
    "However, ",
    "Meanwhile, ",
    "Still, ",
    "Also, ",
    "So ",
    "Yet ",
    "Now, ",
    "Indeed, ",
    "In addition, ",
    "Instead, ",
    "Nevertheless, ",
)

STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    out over own same she should so some such than that the their theirs them themselves then
    there these they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours s t said says say told also per
    """.split()
)

NUMBER_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
]

# Contradictions: (pattern, replacement), word-bounded, lower case only (proper nouns such as
# "North Carolina" stay untouched). Both directions are listed where both read naturally, so
# the flipped words are no more frequent on the hallucinated side than on the factual side.
ANTONYMS: list[tuple[str, str]] = [
    ("increased", "decreased"),
    ("decreased", "increased"),
    ("increase", "decrease"),
    ("decrease", "increase"),
    ("rose", "fell"),
    ("fell", "rose"),
    ("rising", "falling"),
    ("falling", "rising"),
    ("more than", "less than"),
    ("less than", "more than"),
    ("fewer than", "more than"),
    ("higher", "lower"),
    ("lower", "higher"),
    ("highest", "lowest"),
    ("lowest", "highest"),
    ("larger", "smaller"),
    ("smaller", "larger"),
    ("largest", "smallest"),
    ("smallest", "largest"),
    ("biggest", "smallest"),
    ("before", "after"),
    ("after", "before"),
    ("earlier", "later"),
    ("later", "earlier"),
    ("older", "younger"),
    ("younger", "older"),
    ("oldest", "youngest"),
    ("youngest", "oldest"),
    ("won", "lost"),
    ("beat", "lost to"),
    ("defeated", "lost to"),
    ("convicted", "acquitted"),
    ("acquitted", "convicted"),
    ("approved", "rejected"),
    ("rejected", "approved"),
    ("allowed", "banned"),
    ("banned", "allowed"),
    ("legal", "illegal"),
    ("illegal", "legal"),
    ("north", "south"),
    ("south", "north"),
    ("east", "west"),
    ("west", "east"),
    ("northern", "southern"),
    ("southern", "northern"),
    ("eastern", "western"),
    ("western", "eastern"),
    ("above", "below"),
    ("below", "above"),
    ("inside", "outside"),
    ("outside", "inside"),
    ("majority", "minority"),
    ("positive", "negative"),
    ("negative", "positive"),
    ("opened", "closed"),
    ("closed", "opened"),
    ("supported", "opposed"),
    ("opposed", "supported"),
    ("agreed to", "refused to"),
    ("refused to", "agreed to"),
    ("joined", "left"),
    ("hired", "fired"),
    ("fired", "hired"),
    ("began", "ended"),
    ("ended", "began"),
    ("men's", "women's"),
    ("women's", "men's"),
    ("male", "female"),
    ("female", "male"),
    ("private", "public"),
    ("public", "private"),
    ("full-time", "part-time"),
    ("maximum", "minimum"),
    ("minimum", "maximum"),
    ("best", "worst"),
    ("worst", "best"),
    ("better", "worse"),
    ("worse", "better"),
    ("successful", "unsuccessful"),
    ("unsuccessful", "successful"),
    ("upheld", "overturned"),
    ("overturned", "upheld"),
    ("still", "no longer"),
    ("no longer", "still"),
    ("likely", "unlikely"),
    ("unlikely", "likely"),
    ("able", "unable"),
    ("unable", "able"),
    ("without", "with"),
    ("first", "last"),
    ("guilty", "not guilty"),
]
# Words after which an antonym swap would read oddly ("opened fire", "first time"), and words
# before which it would ("named after").
ANTONYM_BLOCKERS = {
    "ended": ("up",),
    "began": ("to",),
    "fired": ("at", "on", "shots", "a ", "into", "upon", "off"),
    "best": ("known", "-known", "selling", "-selling"),
    "better": ("known", "off"),
    "won": ("over",),
    "opened": ("fire", "up"),
    "closed": ("down", "in"),
    "fell": ("ill", "asleep", "in love", "pregnant", "victim", "silent", "apart"),
    "rose": ("to fame",),
    "first": ("time", "name", "half", "day", "week", "year", "of", "lady", "aid", "person"),
    "later": ("that", "in life"),
    "still": ("life",),
    "public": ("house", "school", "library"),
}
_DETERMINERS = ("the", "a", "an", "its", "their", "his", "her", "our", "your", "this", "that")
ANTONYM_PRE_BLOCKERS = {
    "opened": _DETERMINERS,
    "closed": _DETERMINERS,
    "after": ("named", "look", "looks", "looked", "looking", "take", "takes", "took"),
    "before": ("never",),
    "still": ("stood", "standing"),
}
NEGATION_REMOVALS: list[tuple[str, str]] = [
    (r"\bis not\b", "is"),
    (r"\bwas not\b", "was"),
    (r"\bwere not\b", "were"),
    (r"\bare not\b", "are"),
    (r"\bhas not\b", "has"),
    (r"\bhave not\b", "have"),
    (r"\bhad not\b", "had"),
    (r"\bwill not\b", "will"),
    (r"\bcould not\b", "could"),
    (r"\bcannot\b", "can"),
    (r"\bisn't\b", "is"),
    (r"\bwasn't\b", "was"),
    (r"\bweren't\b", "were"),
    (r"\baren't\b", "are"),
    (r"\bhasn't\b", "has"),
    (r"\bhaven't\b", "have"),
    (r"\bhadn't\b", "had"),
    (r"\bcouldn't\b", "could"),
    (r"\bcan't\b", "can"),
    (r"\bdidn't\b", "did"),
    (r"\bdid not\b", "did"),
    (r"\bdoesn't\b", "does"),
    (r"\bdoes not\b", "does"),
    (r"\bnever ", ""),
]
NEGATION_INSERTIONS: list[tuple[str, str]] = [
    (
        r"\b(is|was|are|were) (expected|set|due|able|allowed|required|likely|aware|eligible|"
        r"available|involved|responsible|included|considered|charged|arrested|injured|hurt|"
        r"released|named|granted|told|asked|taken|accused|sentenced|convicted|elected|"
        r"approved|forced|found|given|paid|offered|invited|selected|confirmed|identified)\b",
        r"\1 not \2",
    ),
    (r"\b(has|have|had) been\b", r"\1 not been"),
    (r"\b(will|would|could|should|may) (be|have|also|still)\b", r"\1 not \2"),
    (
        r"\bcan (be|have|also|still|take|make|get|see|help|use|provide|offer|expect|cause)\b",
        r"cannot \1",
    ),
]

# Synonyms for paraphrase; applied to both labels alike.
SYNONYMS: dict[str, list[str]] = {
    "approximately": ["about", "roughly", "around"],
    "about": ["around", "roughly"],
    "around": ["about", "roughly"],
    "purchased": ["bought"],
    "bought": ["purchased"],
    "began": ["started"],
    "started": ["began"],
    "stated": ["said"],
    "large": ["big"],
    "big": ["large"],
    "located": ["situated"],
    "well-known": ["famous"],
    "famous": ["well known"],
    "additional": ["extra"],
    "nearly": ["almost"],
    "almost": ["nearly"],
    "currently": ["now"],
    "numerous": ["many"],
    "several": ["a number of"],
    "prior to": ["before"],
    "due to": ["because of"],
    "because of": ["due to"],
    "in order to": ["to"],
    "quickly": ["rapidly"],
    "rapidly": ["quickly"],
    "discovered": ["found"],
    "detained": ["held"],
    "injured": ["hurt"],
    "despite": ["in spite of"],
    "attempted": ["tried"],
    "assist": ["help"],
    "percent": ["per cent"],
    "per cent": ["percent"],
    "the United States": ["the US"],
    "the United Kingdom": ["the UK"],
    "U.S.": ["US"],
    "also": ["additionally"],
    "very": ["extremely"],
    "children": ["kids"],
    "died": ["passed away"],
    "a number of": ["several"],
    "residents": ["locals"],
}
# Synonyms that only hold before a quantity ("about 300", not "a film about Paris").
QUANTITY_SYNONYMS = frozenset(["approximately", "about", "around"])
CONTRACTIONS = [
    ("did not", "didn't"),
    ("does not", "doesn't"),
    ("do not", "don't"),
    ("is not", "isn't"),
    ("was not", "wasn't"),
    ("were not", "weren't"),
    ("are not", "aren't"),
    ("has not", "hasn't"),
    ("have not", "haven't"),
    ("had not", "hadn't"),
    ("could not", "couldn't"),
    ("would not", "wouldn't"),
    ("will not", "won't"),
    ("cannot", "can't"),
]
IRREGULAR_PAST = {
    "written": "wrote",
    "sung": "sang",
    "drawn": "drew",
    "taken": "took",
    "given": "gave",
    "built": "built",
    "made": "made",
    "held": "held",
    "led": "led",
    "won": "won",
    "beaten": "beat",
    "shot": "shot",
    "chosen": "chose",
    "sold": "sold",
    "bought": "bought",
    "struck": "struck",
    "seen": "saw",
    "thrown": "threw",
    "stolen": "stole",
    "driven": "drove",
    "hit": "hit",
    "caught": "caught",
    "found": "found",
    "paid": "paid",
    "sent": "sent",
    "brought": "brought",
    "run": "ran",
}
NON_AGENTIVE = frozenset("born known called named based located used set".split())

HEDGES = [
    "According to the article, ",
    "Based on the passages, ",
    "From what the documents say, ",
    "It appears that ",
    "The text indicates that ",
    "As far as the sources show, ",
    "It seems that ",
    "From the information provided, ",
    "The source says that ",
    "If I'm reading this right, ",
]
NEWS_HEDGES = ["Reportedly, ", "According to the report, ", "The article reports that "]
OPENERS = ["Sure. ", "Good question. ", "Thanks for asking! ", "Here's what I found. "]
CLOSERS = [
    " Hope that helps!",
    " Let me know if you need more detail.",
    " I hope this answers your question.",
    " Happy to look into anything else.",
    " Let me know if you'd like a longer summary.",
]
FUSERS = [", and ", "; ", ", while ", " — "]

# ---------------------------------------------------------------------------------------------
# Text utilities
# ---------------------------------------------------------------------------------------------

_ABBREVIATIONS = (
    "Mr.|Mrs.|Ms.|Dr.|St.|Jr.|Sr.|Prof.|Gen.|Gov.|Sen.|Rep.|Lt.|Col.|Sgt.|Capt.|No.|vs.|"
    "Jan.|Feb.|Mar.|Apr.|Aug.|Sept.|Sep.|Oct.|Nov.|Dec.|Inc.|Co.|Corp.|Ltd.|U.S.|U.K.|a.m.|p.m.|"
    "Dept.|Mt.|Ft.|Bros.|Ave."
)
_ABBR_RE = re.compile(r"\b(" + _ABBREVIATIONS.replace(".", r"\.") + r")(?=\s)")
_SPLIT_RE = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"”’']))\s+(?=[A-Z0-9\"'‘“(])")
_GLUED_RE = re.compile(r"(?<=[a-z0-9)\]\"”’])\.(?=[A-Z][a-z])")
_NEWS_JUNK = re.compile(
    r"(Scroll down|Click here|READ MORE|PUBLISHED:|UPDATED:|Daily Mail|MailOnline|CNN\b|"
    r"E-mail to a friend|Follow @|twitter\.com|@\w|http|www\.|Photo:|Video:|Sources:|"
    r"\|\s|Share this|Last updated|By \. |Read more|READ:|See also|Watch:|[Pp]ictured|"
    r"^See (?:what|how|the|our)|Football Manager|"
    r"\((?:left|right|centre|center|cetnre|above|below|top|bottom|inset|file|second))",
)
_QUOTE_CHARS = '"“”'


def clean_text(text: str) -> str:
    """Normalise spaces and odd artefacts of the HaluEval texts."""
    text = text.replace("\xa0", " ").replace("\u200b", "")
    text = re.sub(r"\(\s*[;,]\s*", "(", text)
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r" ([.,;:])(?=\s|$)", r"\1", text)
    return text.strip()


def split_sentences(text: str, *, drop_quoted: bool = False) -> list[str]:
    """Split a text into sentences (abbreviation-aware, also splits 'end.Start' joins).

    With ``drop_quoted``, sentences that begin inside a quotation spanning several sentences
    (common in news) are left out: on their own they read as the writer's claims.
    """
    text = _GLUED_RE.sub(". ", clean_text(text))
    protected = _ABBR_RE.sub(lambda m: m.group(1).replace(".", "<DOT>"), text)
    protected = re.sub(r"(?<![\w])([A-Z])\.(?=\s?[A-Z])", r"\1<DOT>", protected)
    parts = [p.replace("<DOT>", ".").strip() for p in _SPLIT_RE.split(protected) if p.strip()]
    if not drop_quoted:
        return parts
    kept: list[str] = []
    depth_double = 0
    depth_single = 0
    for part in parts:
        if depth_double % 2 == 0 and depth_single <= 0:
            kept.append(part)
        depth_double += sum(part.count(ch) for ch in _QUOTE_CHARS)
        opens = len(re.findall(r"(?:^|[\s(])['‘](?=\w)", part))
        closes = len(re.findall(r"(?<=[\w.,!?])['’](?=\s|$)", part))
        depth_single = max(0, depth_single + opens - min(closes, depth_single + opens))
    return kept


def words(text: str) -> list[str]:
    """Lower-cased word tokens."""
    return re.findall(r"[a-z0-9][a-z0-9'’\-]*", text.lower())


def word_count(text: str) -> int:
    """Number of whitespace-separated words."""
    return len(text.split())


def strip_leading_connective(sentence: str) -> str:
    """Drop a discourse connective ('But', 'However,') that only makes sense in the article."""
    for connective in LEADING_CONNECTIVES:
        if sentence.startswith(connective):
            rest = sentence[len(connective) :]
            return capitalise(rest)
    return sentence


def capitalise(text: str) -> str:
    """Upper-case the first letter."""
    return text[:1].upper() + text[1:] if text else text


# Words seen mostly in lower case in the corpus (filled by ``learn_lower_vocabulary``).
_LOWER_VOCAB: set[str] = set()


def learn_lower_vocabulary(texts: Iterable[str]) -> None:
    """Remember which words are ordinary words (mostly written in lower case mid-sentence)."""
    lower: Counter[str] = Counter()
    upper: Counter[str] = Counter()
    for text in texts:
        for m in re.finditer(r"(?<=[a-z,;] )([A-Za-z][a-z'’-]+)", text):
            word = m.group(1)
            (upper if word[0].isupper() else lower)[word.lower()] += 1
    _LOWER_VOCAB.update(w for w, c in lower.items() if c >= 3 and c > 4 * upper[w])


def decapitalise(text: str, names: Iterable[str] = (), context: str = "") -> str:
    """Lower-case the first letter unless the text starts with a name, title or acronym.

    ``names`` are known names (a title such as "The Bell Jar" keeps its capital); a word
    written with a capital in the middle of a sentence of ``context`` is taken for a name.
    """
    parts = text.split(" ", 2)
    bare = parts[0].strip(",.;:'\"")
    if not bare[:1].isupper() or (bare.isupper() and len(bare) > 1):
        return text
    if re.match(r"I(?:'|’|$)", bare):
        return text
    if any(text.startswith(n) for n in names if len(n) > 1 and n[:1].isupper()):
        return text
    low = bare.lower()
    lowered = text[:1].lower() + text[1:]
    if low in {"the", "a", "an"} and len(parts) > 1 and parts[1][:1].isupper():
        # without context "The Usual Suspects" may be a title
        return lowered if context else text
    if low in COMMON_CAPS:
        return lowered
    if context and re.search(rf"(?<=[a-z,;] ){re.escape(bare)}\b", context):
        return text
    if low in FIRST_NAMES or low in LOCATIONS or low in NATIONALITIES:
        return text
    if len(parts) > 1 and parts[1][:1].isupper():
        return text
    if low.split("'")[0].split("’")[0] in _LOWER_VOCAB or low.endswith(("ly", "ing")):
        return lowered
    return text


def has_quote(sentence: str) -> bool:
    """True for sentences that quote speech (double quotes, or single quotes used as quotes)."""
    if any(ch in sentence for ch in _QUOTE_CHARS):
        return True
    if re.search(r"(?:^|[\s(:])['‘][A-Z]", sentence):
        return True
    singles = re.findall(r"(?:^|[\s(])['‘]\w|\w[.,!?]?['’](?=\s|$)", sentence)
    return len(singles) >= 2


_VAGUE_PRONOUNS = frozenset("he she it they his her its their him them".split())


def good_sentence(sentence: str, *, first: bool, min_words: int = 6, max_words: int = 38) -> bool:
    """Whether a sentence can stand in an answer."""
    n = word_count(sentence)
    if n < min_words or n > max_words:
        return False
    if not sentence[:1].isupper() or sentence[-1] not in ".!":
        return False
    if has_quote(sentence) or _NEWS_JUNK.search(sentence):
        return False
    if any(ch in sentence for ch in "[]{}|=<>#*"):
        return False
    if re.match(r"^[A-Z][\w' ]{0,25}: ", sentence):  # photo captions: "Upheld: ..."
        return False
    if sentence.count("(") != sentence.count(")") or " ; " in sentence:
        return False
    if re.search(r"[a-z]{2}\. [a-z]", sentence):  # "slow to. approve": broken lines
        return False
    if len(re.findall(r"\d+", sentence)) > 6 or sentence.count(";") >= 2:  # tables, ratings
        return False
    if first:
        head = [w.lower().strip(",;:") for w in sentence.split()[:5]]
        if head[0] in PRONOUN_STARTS or any(w in _VAGUE_PRONOUNS for w in head):
            return False
    return True


def replace_span(text: str, start: int, end: int, new: str) -> str:
    """Replace ``text[start:end]`` by ``new``, fixing a preceding "a"/"an"."""
    head = text[:start]
    m = re.search(r"\b([Aa]n?) $", head)
    if m and new[:1].isalpha():
        vowel = new[:1].lower() in "aeiou" and not new.lower().startswith(("uni", "eu", "one"))
        article = ("an" if vowel else "a") if m.group(1).islower() else ("An" if vowel else "A")
        head = head[: m.start(1)] + article + " "
    return head + new + text[end:]


def end_sentence(text: str) -> str:
    """Make sure the text ends with sentence punctuation."""
    text = text.rstrip()
    return text if text[-1:] in ".!?" else text + "."


# ---------------------------------------------------------------------------------------------
# Entities and numbers
# ---------------------------------------------------------------------------------------------

_CAP_TOKEN = r"(?:[A-Z]\.(?:[A-Z]\.)*(?=\s[A-Z])|[A-Z][\w'’\-]*(?:\.[A-Z]\.?)*)"
_CONNECT = r"(?:of|for|de|del|della|van|von|der|den|da|du|la|le|al|bin|the|&)"
_ENTITY_RE = re.compile(
    rf"(?<![\w'’-])({_CAP_TOKEN}(?:\s+(?:{_CONNECT}\s+)?{_CAP_TOKEN})*)(?!['’]?\w)"
)
_MONTH_DAY = frozenset(MONTHS + DAYS)


@dataclass(frozen=True)
class Span:
    """A name found in a sentence: character offsets, text and guessed type."""

    start: int
    end: int
    text: str
    etype: str


_ROLES = frozenset(
    "actor actress singer rapper striker midfielder defender goalkeeper chairman director coach"
    " manager officer detective professor spokesman spokeswoman mayor star boss captain"
    " winger forward keeper model comedian presenter author writer former".split()
)


def _trim_entity(text: str, start: int) -> tuple[str, int] | None:
    """Drop leading common words ('The', 'In') and trailing possessives from a name run."""
    tokens = text.split()
    while tokens and (
        tokens[0].lower() in COMMON_CAPS or tokens[0] in _MONTH_DAY or tokens[0].lower() in _ROLES
    ):
        start += len(tokens[0]) + 1
        tokens = tokens[1:]
    while tokens and (tokens[-1].lower() in COMMON_CAPS or tokens[-1] in _MONTH_DAY):
        tokens = tokens[:-1]
    while tokens and tokens[-1].lower() in {"of", "for", "de", "the", "&", "van", "von", "al"}:
        tokens = tokens[:-1]
    if not tokens:
        return None
    if tokens[0].lower() in FIRST_NAMES and "of" in tokens:
        tokens = tokens[: tokens.index("of")]  # "Dan Balz of The Washington Post"
    if any(t in _MONTH_DAY for t in tokens):
        return None
    out = " ".join(tokens)
    for suffix in ("'s", "’s"):
        if out.endswith(suffix):
            out = out[: -len(suffix)]
    return out.rstrip(".,;:'’"), start


def guess_type(name: str, prev_word: str, known: dict[str, str]) -> str:
    """Heuristic entity type: PERSON, LOC, ORG, NAT, WORK or MISC."""
    if name in known:
        return known[name]
    tokens = name.split()
    low = [t.lower().rstrip(".") for t in tokens]
    if len(tokens) == 1 and low[0] in NATIONALITIES:
        return "NAT"
    if name.lower() in LOCATIONS or name.lower() in MULTIWORD_LOCATIONS:
        return "LOC"
    if name in {"US", "UK", "USA", "U.S.", "U.K.", "UAE"}:
        return "LOC"
    if any(t in ORG_WORDS or t + "." in ORG_WORDS for t in low) or (
        name.isupper() and 2 <= len(name) <= 5
    ):
        return "ORG"
    if low[0] in FIRST_NAMES and len(tokens) >= 2:
        return "PERSON"
    if prev_word.lower().rstrip(",") in TITLES and len(tokens) <= 3:
        return "PERSON"
    return "MISC"


def _name_like(token: str) -> bool:
    """A single capitalised word that is a name even at the start of a sentence."""
    low = token.lower()
    return (
        any(ch.isupper() or ch.isdigit() for ch in token[1:])
        or low in LOCATIONS
        or low in NATIONALITIES
        or low in FIRST_NAMES
    )


def find_entities(
    sentence: str, known: dict[str, str], initial_ok: frozenset[str] = frozenset()
) -> list[Span]:
    """Capitalised name runs of a sentence with a guessed type.

    Names already typed in ``known`` are matched first as whole strings (so that "The Bell
    Jar" or "Ministry for Chieftaincy and Traditional Affairs" stay one name).
    """
    spans: list[Span] = []
    taken = [False] * len(sentence)
    for name in sorted((n for n in known if " " in n and n in sentence), key=len, reverse=True):
        for m in re.finditer(rf"(?<![\w'’-]){re.escape(name)}(?![\w'’-])", sentence):
            if not any(taken[m.start() : m.end()]):
                spans.append(Span(m.start(), m.end(), name, known[name]))
                for k in range(m.start(), m.end()):
                    taken[k] = True
    for m in _ENTITY_RE.finditer(sentence):
        if any(taken[m.start(1) : m.end(1)]):
            continue
        trimmed = _trim_entity(m.group(1), m.start(1))
        if trimmed is None:
            continue
        name, start = trimmed
        if len(name) < 2:
            continue
        at_start = sentence[:start].strip() == ""
        if (
            at_start
            and " " not in name
            and not (name in known or name in initial_ok or _name_like(name))
        ):
            continue
        before = sentence[:start].split()
        prev = before[-1] if before else ""
        spans.append(Span(start, start + len(name), name, guess_type(name, prev, known)))
    return sorted(spans, key=lambda s: s.start)


_PLACE_HEADS = frozenset(
    "mount lake river cape fort port saint st san santa los las new north south east west"
    " upper lower great little old royal grand central national".split()
)
_SAID_CUE = re.compile(
    r"^(?:,? (?:said|says|told|added|explained|admitted|who)\b"
    r"|'s (?:wife|husband|mother|father|son|daughter))"
)
_PERSON_CUE = re.compile(r"^(?:'s)?,? (?:\(born|who\b|said\b|says\b|told\b|has said|added\b)")
_PLACE_CUE = re.compile(r"^, (?:[A-Z][a-z]+ ?){1,3}\b")


def doc_entity_types(sentences: Iterable[str]) -> dict[str, str]:
    """Type every name of a document once, and let surnames inherit their person's type.

    Besides the word lists, a multi-word name followed by "(born", "who" or "said", or whose
    last word is used alone elsewhere in the document, is a person; a name after "in" and
    before ", <known place>" is a place.
    """
    sentences = list(sentences)
    known: dict[str, str] = {}
    votes: dict[str, Counter[str]] = {}
    singles: set[str] = set()
    inner: set[str] = set()
    for sentence in sentences:
        for span in find_entities(sentence, {}):
            if span.start > 0:
                inner.add(span.text)
    initial_ok = frozenset(inner)
    for sentence in sentences:
        for span in find_entities(sentence, {}, initial_ok):
            etype = span.etype
            after = sentence[span.end :]
            before = sentence[: span.start].rstrip().split()
            prev = before[-1].lower() if before else ""
            n_tokens = len(span.text.split())
            if etype == "MISC" and 2 <= n_tokens <= 3 and _PERSON_CUE.match(after):
                etype = "PERSON"
            if etype == "MISC" and prev in {"in", "near", "from"}:
                place = _PLACE_CUE.match(after)
                if place and guess_type(place.group(0)[2:].strip(), "", {}) == "LOC":
                    etype = "LOC"
            votes.setdefault(span.text, Counter())[etype] += 1
            if n_tokens == 1 and (
                _SAID_CUE.match(after) or prev.rstrip(".") in {"mr", "mrs", "ms", "dr", "sir"}
            ):
                singles.add(span.text)
    for name, counter in votes.items():
        best = counter.most_common(1)[0][0]
        if counter.get("PERSON"):
            best = "PERSON"
        tokens = name.split()
        if (
            best == "MISC"
            and 2 <= len(tokens) <= 3
            and tokens[-1] in singles
            and all(t.isalpha() for t in tokens)
            and tokens[0].lower() not in _PLACE_HEADS
        ):
            best = "PERSON"
        known[name] = best
    for name, etype in list(known.items()):
        if etype == "PERSON" and " " in name:
            surname = name.split()[-1]
            if surname in known and known[surname] == "MISC":
                known[surname] = "PERSON"
    return known


_NUM_RE = re.compile(
    r"(?<![\w.,/:–-])(?P<cur>[$£€])?(?P<num>\d{1,3}(?:,\d{3})+|\d+)(?P<dec>\.\d+)?"
    r"(?P<suf>%|st|nd|rd|th|s)?"
    r"(?=$|[\s,.;:!?)'’]|-(?:year|month|week|day|hour|minute|mile|foot|metre|meter|point|"
    r"game|man|member|time|storey|story|yard|acre|page|seat|bed|room))"
)
_NUMWORD_RE = re.compile(
    r"(?<![\w-])(two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)(?![\w-])"
)
_SCALE_RE = re.compile(r"\b(million|billion|thousand|hundreds|thousands|millions)\b")


@dataclass(frozen=True)
class NumberSpan:
    """A changeable number, date, month, weekday or scale word in a sentence."""

    start: int
    end: int
    text: str
    kind: str  # year, int, decimal, ordinal, decade, word, month, day, scale
    unit: str  # the word after the number, for conflation


def _next_word(text: str, end: int) -> str:
    """The word (or "%") right after position ``end``."""
    m = re.match(r"[\s-]*(%|[A-Za-z]+)", text[end:])
    return m.group(1).lower() if m else ""


def find_numbers(sentence: str) -> list[NumberSpan]:
    """Numbers, dates, months and weekdays of a sentence that can be changed."""
    found: list[NumberSpan] = []
    for m in _NUM_RE.finditer(sentence):
        before = sentence[: m.start()].rstrip()
        prev = before.split()[-1] if before.split() else ""
        if prev[:1].isupper() and prev.strip(",") not in MONTHS and prev not in {"In", "On"}:
            continue  # "Apollo 11", "Formula 1", "Windows 10"
        if prev.lower() in {"no.", "number", "route", "chapter", "section", "article", "page"}:
            continue
        num = m.group("num")
        suf = m.group("suf") or ""
        dec = m.group("dec") or ""
        if suf in {"st", "nd", "rd", "th"}:
            kind = "ordinal"
        elif suf == "s" and len(num) == 4:
            kind = "decade"
        elif suf == "s":
            continue
        elif dec:
            kind = "decimal"
        elif len(num) == 4 and 1500 <= int(num) <= 2030 and not m.group("cur"):
            kind = "year"
        else:
            kind = "int"
        found.append(
            NumberSpan(m.start(), m.end(), m.group(0), kind, _next_word(sentence, m.end()))
        )
    for m in _NUMWORD_RE.finditer(sentence):
        found.append(
            NumberSpan(m.start(), m.end(), m.group(0), "word", _next_word(sentence, m.end()))
        )
    for m in re.finditer(r"\b(" + "|".join(MONTHS) + r")\b", sentence):
        found.append(NumberSpan(m.start(), m.end(), m.group(0), "month", ""))
    for m in re.finditer(r"\b(" + "|".join(DAYS) + r")\b", sentence):
        found.append(NumberSpan(m.start(), m.end(), m.group(0), "day", ""))
    for m in _SCALE_RE.finditer(sentence):
        found.append(NumberSpan(m.start(), m.end(), m.group(0), "scale", ""))
    return sorted(found, key=lambda s: s.start)


def _format_like(original: str, value: float, decimals: int) -> str:
    """Format ``value`` like ``original`` (decimals, thousands separators)."""
    if decimals:
        return f"{value:.{decimals}f}"
    n = round(value)
    return f"{n:,}" if "," in original else str(n)


def _round_like(original_int: int, value: float) -> int:
    """Round ``value`` to the precision of ``original_int`` (as many trailing zeros)."""
    digits = str(original_int)
    zeros = len(digits) - len(digits.rstrip("0")) if original_int else 0
    step = int(10 ** min(zeros, max(len(digits) - 1, 0)))
    return max(step, round(value / step) * step)


def change_number(span: NumberSpan, rng: random.Random) -> str | None:
    """A plausible, different value for a number, date, month or weekday (same format)."""
    text = span.text
    if span.kind == "month":
        i = MONTHS.index(text)
        return MONTHS[(i + rng.choice([-3, -2, -1, 1, 2, 3, 4])) % 12]
    if span.kind == "day":
        i = DAYS.index(text)
        return DAYS[(i + rng.choice([-2, -1, 1, 2, 3])) % 7]
    if span.kind == "word":
        i = NUMBER_WORDS.index(text)
        options = [w for j, w in enumerate(NUMBER_WORDS) if 2 <= j <= 12 and 0 < abs(j - i) <= 3]
        return rng.choice(options)
    if span.kind == "scale":
        swap = {
            "million": "billion",
            "billion": "million",
            "thousand": "million",
            "hundreds": "thousands",
            "thousands": "hundreds",
            "millions": "thousands",
        }
        return swap[text]
    m = _NUM_RE.fullmatch(text) or _NUM_RE.match(text)
    if m is None:
        return None
    cur = m.group("cur") or ""
    num = m.group("num")
    dec = m.group("dec") or ""
    suf = m.group("suf") or ""
    value = int(num.replace(",", ""))
    if span.kind == "year":
        delta = rng.choice([-6, -4, -3, -2, -1, 1, 2, 3, 4, 6])
        new = value + delta if value + delta <= 2017 else value - abs(delta)
        return str(new)
    if span.kind == "decade":
        return f"{value + rng.choice([-20, -10, 10, 20])}s"
    if span.kind == "ordinal":
        if value > 40:
            return None
        new = max(1, value + rng.choice([-2, -1, 1, 2, 3]))
        if new == value:
            new = value + 1
        suffix = "th" if 10 <= new % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(new % 10, "th")
        return f"{new}{suffix}"
    if span.kind == "decimal":
        places = len(dec) - 1
        step = 10 ** (-places)
        new_f = float(num.replace(",", "") + dec) + rng.choice([-3, -2, -1, 1, 2, 3]) * step
        if new_f <= 0:
            new_f = float(num.replace(",", "") + dec) + 2 * step
        return cur + _format_like(num, new_f, places) + suf
    # plain integer
    if value <= 1:
        return None
    if value <= 12:
        new = rng.choice([v for v in range(2, 16) if 0 < abs(v - value) <= 3])
    elif value < 100:
        spread = max(2, int(value * 0.35))
        new = value + rng.choice([-1, 1]) * rng.randint(2, spread)
        new = max(new, 13) if new <= 12 else new
    else:
        new = _round_like(value, value * rng.choice([0.5, 0.6, 0.75, 1.3, 1.5, 2.0]))
    if new == value:
        new = value + (10 if value >= 100 else 2)
    return cur + _format_like(num, float(new), 0) + suf


# ---------------------------------------------------------------------------------------------
# Documents
# ---------------------------------------------------------------------------------------------


@dataclass
class Doc:
    """A source document cut into passages of sentences."""

    doc_id: str
    source: str  # qa, news, kb
    passages: list[list[str]]
    types: dict[str, str]
    extra_sentences: list[str] = field(default_factory=list)  # outside the passages

    @property
    def sentences(self) -> list[str]:
        return [s for p in self.passages for s in p]

    def text(self) -> str:
        return " ".join(self.sentences)


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file."""
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _unique_contexts(rows: list[dict[str, Any]]) -> list[str]:
    """Each distinct context string once, in file order (HaluEval repeats them)."""
    seen: dict[str, None] = {}
    for row in rows:
        for ctx in row["contexts"]:
            seen.setdefault(ctx, None)
    return list(seen)


def _chunk(sentences: list[str], rng: random.Random, lo: int = 2, hi: int = 5) -> list[list[str]]:
    """Cut sentences into passages of ``lo``..``hi`` sentences (at most ~900 characters)."""
    passages: list[list[str]] = []
    i = 0
    while i < len(sentences):
        size = rng.randint(lo, hi)
        chunk: list[str] = []
        while i < len(sentences) and len(chunk) < size:
            if chunk and sum(len(s) for s in chunk) + len(sentences[i]) > 900:
                break
            chunk.append(sentences[i])
            i += 1
        passages.append(chunk)
    return passages


def load_qa_docs(path: Path, rng: random.Random) -> list[Doc]:
    """Wikipedia knowledge of the HaluEval QA dev file: usually two glued paragraphs."""
    docs: list[Doc] = []
    for i, ctx in enumerate(_unique_contexts(load_jsonl(path))):
        raw = clean_text(ctx)
        paragraphs = [p for p in _GLUED_RE.split(raw) if p.strip()]
        passages = []
        for para in paragraphs:
            sents = split_sentences(para if para.endswith(".") else para + ".")
            if sents:
                passages.append(sents)
        if not passages:
            continue
        sents = [s for p in passages for s in p]
        docs.append(Doc(f"qa{i}", "qa", passages, doc_entity_types(sents)))
    return docs


def dedupe_sentences(sentences: list[str], threshold: float = 0.6) -> list[str]:
    """Drop sentences that repeat an earlier one (news pages repeat captions and ledes)."""
    kept: list[str] = []
    bags: list[set[str]] = []
    for sentence in sentences:
        bag = set(words(sentence))
        if any(len(bag & b) / max(1, len(bag | b)) > threshold for b in bags):
            continue
        kept.append(sentence)
        bags.append(bag)
    return kept


def load_news_docs(path: Path, rng: random.Random) -> list[Doc]:
    """CNN/DailyMail articles of the HaluEval summarization dev file, cut into passages."""
    docs: list[Doc] = []
    for i, ctx in enumerate(_unique_contexts(load_jsonl(path))):
        sents = [strip_leading_connective(s) for s in split_sentences(ctx, drop_quoted=True)]
        sents = dedupe_sentences(
            [s for s in sents if good_sentence(s, first=False, min_words=5, max_words=45)]
        )
        if len(sents) < 6:
            continue
        budget, kept = 0, []
        for s in sents:
            if budget + len(s) > 2600:
                break
            kept.append(s)
            budget += len(s)
        passages = _chunk(kept, rng, 2, 5)
        docs.append(Doc(f"news{i}", "news", passages, doc_entity_types(sents), sents[len(kept) :]))
    return docs


_KB_RELATIONS = {
    "is starring": ("WORK", "PERSON", "{a} stars {b}."),
    "starred in": ("PERSON", "WORK", "{a} starred in {b}."),
    "wrote": ("PERSON", "WORK", "{a} wrote {b}."),
    "is written by": ("WORK", "PERSON", "{a} was written by {b}."),
    "directed": ("PERSON", "WORK", "{a} directed {b}."),
    "is directed by": ("WORK", "PERSON", "{a} was directed by {b}."),
    "has genre": ("WORK", "GENRE", "{a} is classed as {b}."),
    "was released": ("WORK", "YEAR", "{a} was released in {b}."),
}
_KB_SPLIT = re.compile(r" (" + "|".join(sorted(_KB_RELATIONS, key=len, reverse=True)) + r") ")


def _kb_split_glued(segment: str) -> tuple[str, str] | None:
    """'TurboTurbo' -> ('Turbo', 'Turbo'); 'Chasing Amy. Chasing Amy' -> both halves."""
    if ". " in segment:
        left, right = segment.rsplit(". ", 1)
        return left.strip(), right.strip()
    n = len(segment)
    if n % 2 == 0 and segment[: n // 2] == segment[n // 2 :]:
        return segment[: n // 2], segment[n // 2 :]
    return None


def parse_kb(knowledge: str) -> list[tuple[str, str, str]] | None:
    """Triples (subject, relation, object) of one dialogue knowledge string, or None."""
    if "`" in knowledge or ":" in knowledge:
        return None
    parts = _KB_SPLIT.split(knowledge.strip())
    if len(parts) < 3 or len(parts) % 2 == 0:
        return None
    triples: list[tuple[str, str, str]] = []
    subject = parts[0].strip()
    for k in range(1, len(parts), 2):
        relation = parts[k]
        segment = parts[k + 1].strip()
        if k + 2 < len(parts):
            split = _kb_split_glued(segment)
            if split is None:
                return None
            obj, nxt = split
        else:
            obj, nxt = segment.rstrip("."), ""
        obj = re.sub(r" \([^)]*\)$", "", obj)
        subject = re.sub(r" \([^)]*\)$", "", subject)
        if any(
            not x or len(x) > 60 or ". " in x or " is " in x or " has " in x or "/" in x
            for x in (obj, subject)
        ):
            return None
        triples.append((subject, relation, obj))
        subject = nxt
    return triples


def load_kb_docs(path: Path, rng: random.Random) -> list[Doc]:
    """Knowledge triples of the HaluEval dialogue dev file, written out as short sentences."""
    docs: list[Doc] = []
    for i, ctx in enumerate(_unique_contexts(load_jsonl(path))):
        triples = parse_kb(clean_text(ctx))
        if not triples:
            continue
        types: dict[str, str] = {}
        sents: list[str] = []
        seen_pairs: set[frozenset[str]] = set()
        ok = True
        for a, rel, b in triples:
            ta, tb, template = _KB_RELATIONS[rel]
            if rel == "was released" and not re.fullmatch(r"\d{4}", b):
                ok = False
                break
            for name, t in ((a, ta), (b, tb)):
                if t in {"PERSON", "WORK"}:
                    if types.get(name, t) != t:
                        ok = False
                    types[name] = t
            sentence = template.format(a=a, b=b.lower() if tb == "GENRE" else b)
            pair = frozenset((a, b))
            if pair not in seen_pairs:
                seen_pairs.add(pair)
                sents.append(sentence)
        if ok and len(sents) >= 2:
            docs.append(Doc(f"kb{i}", "kb", [sents], types))
    return docs


# ---------------------------------------------------------------------------------------------
# Similar documents (for distractors and for on-topic unsupported sentences)
# ---------------------------------------------------------------------------------------------


class Neighbours:
    """Nearest documents by TF-IDF cosine (pure Python, sparse)."""

    def __init__(self, docs: Sequence[Doc]) -> None:
        self.docs = list(docs)
        df: Counter[str] = Counter()
        bags: list[Counter[str]] = []
        for doc in self.docs:
            bag = Counter(w for w in words(doc.text()) if w not in STOPWORDS and len(w) > 2)
            bags.append(bag)
            df.update(bag.keys())
        n = len(self.docs)
        self.vectors: list[dict[str, float]] = []
        for bag in bags:
            vec = {w: (1 + math.log(c)) * math.log(n / df[w]) for w, c in bag.items() if df[w] > 1}
            norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
            self.vectors.append({w: v / norm for w, v in vec.items()})
        self.index: dict[str, list[tuple[int, float]]] = {}
        for i, vec in enumerate(self.vectors):
            for w, v in vec.items():
                self.index.setdefault(w, []).append((i, v))
        self._cache: dict[int, list[tuple[int, float]]] = {}

    def nearest(self, i: int, k: int = 12, min_similarity: float = 0.0) -> list[int]:
        """Up to ``k`` most similar documents with a cosine of at least ``min_similarity``."""
        if i not in self._cache:
            scores: dict[int, float] = {}
            for w, v in self.vectors[i].items():
                for j, u in self.index[w]:
                    if j != i:
                        scores[j] = scores.get(j, 0.0) + v * u
            self._cache[i] = sorted(scores.items(), key=lambda t: (-t[1], t[0]))[:40]
        return [j for j, score in self._cache[i][:k] if score >= min_similarity]


# ---------------------------------------------------------------------------------------------
# Paraphrasing (applied alike to both labels)
# ---------------------------------------------------------------------------------------------

_MONTH_ALT = "|".join(MONTHS)
_DATE_MDY = re.compile(rf"\b({_MONTH_ALT}) (\d{{1,2}}), (\d{{4}})\b")
_DATE_DMY = re.compile(rf"\b(\d{{1,2}}) ({_MONTH_ALT}) (\d{{4}})\b")


def para_according(sentence: str, rng: random.Random, names: Sequence[str]) -> str | None:
    """'..., police said.' -> 'According to police, ...' (and 'X said that Y' likewise)."""
    m = re.match(
        r"^(?P<body>.{20,}), (?P<who>(?:the |a )?[\w.' -]{2,50}?) "
        r"(?:said|says|announced|reported)(?: on \w+| \w+day| in a statement)?\.$",
        sentence,
    )
    if m and _speaker_ok(m.group("who")):
        who = m.group("who")
        return f"According to {who}, {decapitalise(m.group('body'), names)}."
    m = re.match(
        r"^(?P<who>[A-Z][\w.' -]{2,50}?) (?:said|says|announced)(?: on)?(?: \w+day)? (?:that )?"
        r"(?P<body>.{20,})$",
        sentence,
    )
    if m and _speaker_ok(m.group("who")):
        who = m.group("who")
        if who.split()[0] in {"A", "The", "An"} and len(who.split()) > 1:
            who = who[:1].lower() + who[1:]
        return f"According to {who}, {decapitalise(m.group('body'), names)}"
    return None


_NOT_SPEAKER = frozenset(
    "he she it they has have had was is were also later previously then who which that and"
    " but when as".split()
)


def _speaker_ok(who: str) -> bool:
    """A plausible speaker phrase: at most six words and no verb or pronoun in it."""
    tokens = who.lower().split()
    return 0 < len(tokens) <= 6 and not any(t in _NOT_SPEAKER for t in tokens)


def para_move_adverbial(sentence: str, rng: random.Random, names: Sequence[str]) -> str | None:
    """Move a leading 'In 1994, ...' to the end of the sentence, or a trailing one to the front."""
    m = re.match(r"^(In|On|During|By) ([^,]{3,30}), (.{15,})\.$", sentence)
    if m and not re.search(r"\b(he|she|it|they|him|her)\b", m.group(2)):
        rest = m.group(3)
        if rest[:1].islower() and rest.split()[0] in COMMON_CAPS:
            rest = capitalise(rest)
        elif rest[:1].islower():
            return None
        return f"{rest} {m.group(1).lower()} {m.group(2)}."
    when = rf"(?:(?:{_MONTH_ALT}) )?\d{{4}}|(?:{_MONTH_ALT}) \d{{1,2}}, \d{{4}}"
    m = re.match(
        rf"^(.{{15,}}) (in|on) ({when})\.$",
        sentence,
    )
    if (
        m
        and not re.search(
            r"\b(that|which|who|whom|whose|where|when|and|but|after|before)\b", m.group(1)
        )
        and "," not in m.group(1)
        and not re.search(r"\b\d{4}\b", m.group(1))
    ):
        return f"{capitalise(m.group(2))} {m.group(3)}, {decapitalise(m.group(1), names)}."
    return None


def para_date_format(sentence: str, rng: random.Random, names: Sequence[str]) -> str | None:
    """'March 31, 1945' <-> '31 March 1945'."""
    if _DATE_MDY.search(sentence):
        return _DATE_MDY.sub(r"\2 \1 \3", sentence, count=1)
    if _DATE_DMY.search(sentence):
        return _DATE_DMY.sub(r"\2 \1, \3", sentence, count=1)
    return None


def para_number_format(sentence: str, rng: random.Random, names: Sequence[str]) -> str | None:
    """'9 months' <-> 'nine months', '50 percent' <-> '50%'."""
    m = re.search(r"(?<![\w.,/:-])([2-9]|10) (?=[a-z]{3,})(?!a\.m|p\.m|per)", sentence)
    if m and not sentence[: m.start()].rstrip().endswith((",", "$", "£", "€")):
        prev = sentence[: m.start()].split()
        if not prev or not prev[-1][:1].isupper():
            return replace_span(sentence, m.start(1), m.end(1), NUMBER_WORDS[int(m.group(1))])
    m = re.search(
        r"\b(two|three|four|five|six|seven|eight|nine|ten)\b"
        r"(?= (?:years|months|weeks|days|hours|minutes|miles|kilometres|percent|million|billion))",
        sentence,
    )
    if m:
        return replace_span(sentence, m.start(), m.end(), str(NUMBER_WORDS.index(m.group(1))))
    m = re.search(r"\b(\d+(?:\.\d+)?) (?:percent|per cent)\b", sentence)
    if m:
        return replace_span(sentence, m.start(), m.end(), m.group(1) + "%")
    m = re.search(r"\b(\d+(?:\.\d+)?)%", sentence)
    if m:
        return replace_span(sentence, m.start(), m.end(), m.group(1) + " percent")
    return None


def _synonym_spans(sentence: str, key: str) -> list[tuple[int, int]]:
    """Where ``key`` may be replaced by a synonym (not after an auxiliary, not "about to")."""
    spans = []
    number = "|".join(NUMBER_WORDS[2:])
    for m in re.finditer(rf"(?<![\w-]){re.escape(key)}(?![\w-])", sentence):
        before = sentence[: m.start()].split()
        after = sentence[m.end() :]
        if before and before[-1].lower() in {"has", "have", "had", "been", "being", "be"}:
            continue
        if after.startswith((" to ", " of ")):
            continue
        if key in QUANTITY_SYNONYMS and not re.match(rf" (?:[$£€]?\d|(?:{number})\b)", after):
            continue
        spans.append((m.start(), m.end()))
    return spans


def para_synonym(sentence: str, rng: random.Random, names: Sequence[str]) -> str | None:
    """Replace one or two words by a synonym."""
    keys = [k for k in SYNONYMS if _synonym_spans(sentence, k)]
    if not keys:
        return None
    rng.shuffle(keys)
    out = sentence
    for key in keys[: rng.choice([1, 1, 2])]:
        spans = _synonym_spans(out, key)
        if spans:
            start, end = spans[0]
            out = out[:start] + rng.choice(SYNONYMS[key]) + out[end:]
    return out if out != sentence else None


def para_contraction(sentence: str, rng: random.Random, names: Sequence[str]) -> str | None:
    """Contract 'did not' -> "didn't" or expand the reverse."""
    for full, short in CONTRACTIONS:
        if re.search(rf"\b{full}\b", sentence):
            return re.sub(rf"\b{full}\b", short, sentence, count=1)
        if re.search(rf"\b{short}(?!\w)", sentence):
            return re.sub(rf"\b{short}(?!\w)", full, sentence, count=1)
    return None


def para_active_voice(sentence: str, rng: random.Random, names: Sequence[str]) -> str | None:
    """Passive to active: 'The album was produced by X in 1994.' -> 'X produced the album ...'."""
    m = re.match(
        r"^(?P<obj>[A-Z][^,]{2,60}?) (?:was|were) (?P<verb>\w+) by "
        r"(?P<agent>(?:[A-Z][\w'’.-]*)(?: (?:[A-Z][\w'’.-]*|of|and|the))*)(?P<tail>[^.]*)\.$",
        sentence,
    )
    if not m:
        return None
    verb = m.group("verb")
    if verb in NON_AGENTIVE:
        return None
    if verb in IRREGULAR_PAST:
        past = IRREGULAR_PAST[verb]
    elif verb.endswith("ed"):
        past = verb
    else:
        return None
    tail = m.group("tail")
    if tail and not re.match(r"^(?: in| on| at| during| for| after| before|,)", tail):
        return None
    obj = m.group("obj")
    if not all(t[:1].isupper() for t in obj.split() if t not in {"of", "the", "and", "a"}):
        obj = decapitalise(obj, names)
    return f"{m.group('agent')} {past} {obj}{tail}."


def para_born(sentence: str, rng: random.Random, names: Sequence[str]) -> str | None:
    """'X (born 3 May 1950) is ...' -> 'X, born 3 May 1950, is ...'."""
    m = re.search(r" \((born [^()]{4,40})\) ", sentence)
    if not m:
        return None
    return sentence[: m.start()] + f", {m.group(1)}, " + sentence[m.end() :]


PARAPHRASERS: list[Callable[[str, random.Random, Sequence[str]], str | None]] = [
    para_according,
    para_move_adverbial,
    para_date_format,
    para_number_format,
    para_synonym,
    para_contraction,
    para_active_voice,
    para_born,
]


def paraphrase(
    sentence: str, rng: random.Random, names: Sequence[str] = (), max_ops: int = 2
) -> tuple[str, int]:
    """Apply up to ``max_ops`` paraphrase operations; returns the text and how many applied.

    ``names`` are known names, which keep their capital when moved inside a sentence.
    """
    ops = list(PARAPHRASERS)
    rng.shuffle(ops)
    applied = 0
    out = sentence
    for op in ops:
        if applied >= max_ops:
            break
        new = op(out, rng, names)
        if (
            new
            and new != out
            and good_sentence(end_sentence(new), first=False, min_words=3, max_words=45)
        ):
            out = end_sentence(new)
            applied += 1
    return out, applied


# ---------------------------------------------------------------------------------------------
# Answer plans (label-blind)
# ---------------------------------------------------------------------------------------------

FACTUAL_PROSE_KINDS = ["extractive", "paraphrase", "synthesis", "hedged", "multi", "numeric"]
FACTUAL_PROSE_WEIGHTS = [0.15, 0.21, 0.18, 0.14, 0.14, 0.18]
HALLUCINATED_PROSE_KINDS = [
    "entity_swap",
    "number_change",
    "contradiction",
    "wrong_relation",
    "conflation",
    "unsupported_addition",
    "fabricated",
]
SWAP_TYPES = ("PERSON", "LOC", "ORG", "NAT", "WORK")
# Capitalised abbreviations that name no particular entity.
COMMON_ACRONYMS = frozenset(
    "DNA TV CEO GP HIV AIDS CCTV MP PM ID UK US USA EU UN MRI ICU SUV GPS IVF ATM PC CD DVD"
    " AM FM PR IT HR VIP OK".split()
)
DOMAIN_OF_SOURCE = {"qa": "encyclopedic", "news": "news", "kb": "entertainment"}
MAX_ANSWER_WORDS = 85


@dataclass
class Unit:
    """One answer sentence: a context sentence, or two fused into one."""

    sentences: list[str]
    fuser: str = ""

    def render(self, names: Iterable[str] = (), context: str = "") -> str:
        if len(self.sentences) == 1:
            return end_sentence(self.sentences[0])
        first = self.sentences[0].rstrip(".!")
        second = decapitalise(self.sentences[1], names, context)
        return end_sentence(first + self.fuser + second)


@dataclass
class ProsePlan:
    """Everything about a prose case that does not depend on its label."""

    doc: Doc
    contexts: list[str]
    context_sentences: list[str]
    types: dict[str, str]
    units: list[Unit]
    base_kind: str
    question: str = ""
    topic: str | None = None
    opener: str = ""
    hedge: str = ""
    closer: str = ""

    def sentences(self) -> list[str]:
        return [s for u in self.units for s in u.sentences]

    def render(self) -> str:
        names = [n for n in self.types if " " in n]
        context = " ".join(self.contexts)
        body = " ".join(u.render(names, context) for u in self.units)
        if self.hedge:
            body = self.hedge + decapitalise(body, names, context)
        return (self.opener + body + self.closer).strip()


@dataclass
class Sources:
    """Documents per source, with neighbour indexes."""

    docs: dict[str, list[Doc]]
    neighbours: dict[str, Neighbours]


@dataclass
class BalanceState:
    """Running counts used to keep hallucination kinds and negations balanced."""

    kinds: Counter[str] = field(default_factory=Counter)
    not_balance: int = 0  # negations inserted minus removed on the hallucinated side


def _first_ok(sentence: str) -> bool:
    """Whether a sentence can open an answer."""
    return good_sentence(sentence, first=True)


def _later_ok(sentence: str) -> bool:
    """Whether a sentence can follow another one in an answer."""
    return good_sentence(sentence, first=False, min_words=4)


def _has_number(sentence: str) -> bool:
    """Whether a sentence has a number, date or month that a question could be about."""
    return any(n.kind not in {"day", "scale"} for n in find_numbers(sentence))


def build_contexts(
    doc: Doc, sources: Sources, rng: random.Random
) -> tuple[list[list[str]], list[str], dict[str, str]]:
    """Pick the passages shown as contexts: 1-4 of the document, maybe a distractor.

    Returns the document's passages used for the answer, the context strings (in display
    order) and the entity types of everything shown.
    """
    types = dict(doc.types)
    if doc.source == "news":
        n = len(doc.passages)
        k = rng.choice([1, 2, 2, 3, 3, 4])
        k = min(k, n)
        start = rng.randint(0, n - k)
        chosen = doc.passages[start : start + k]
        distractor_p = 0.2
    elif doc.source == "qa":
        # Usually both paragraphs; sometimes only the first, which leaves the second (often
        # about an entity the first one names) as knowledge the contexts do not give.
        chosen = list(doc.passages)
        if len(chosen) == 2 and rng.random() < 0.35:
            chosen = chosen[:1]
        distractor_p = 0.5
    else:
        chosen = list(doc.passages)
        distractor_p = 0.85
    contexts = [" ".join(p) for p in chosen]
    n_distractors = 0
    if len(contexts) < 4 and rng.random() < distractor_p:
        n_distractors = 1 if rng.random() < 0.7 or len(contexts) >= 3 else 2
    pool = sources.docs[doc.source]
    index = pool.index(doc)
    near = sources.neighbours[doc.source].nearest(index)
    for _ in range(n_distractors):
        other = pool[rng.choice(near[:8])] if near else rng.choice(pool)
        if other is doc:
            continue
        passage = rng.choice(other.passages)
        text = " ".join(passage)
        if text in contexts:
            continue
        contexts.insert(rng.randint(0, len(contexts)), text)
        for name, etype in other.types.items():
            types.setdefault(name, etype)
    return chosen, contexts, types


def _pick_first(
    candidates: list[tuple[int, int]],
    passages: list[list[str]],
    rng: random.Random,
    predicate: Callable[[str], bool] = lambda s: True,
) -> tuple[int, int] | None:
    """A random candidate position whose sentence satisfies ``predicate``."""
    options = [c for c in candidates if predicate(passages[c[0]][c[1]])]
    return rng.choice(options) if options else None


def _name_tokens(sentence: str) -> set[str]:
    """Capitalised words of a sentence other than its first (to relate sentences)."""
    tokens = re.findall(r"\b[A-Z][\w'’-]{2,}", sentence)
    return {t for t in tokens[1:] if t.lower() not in COMMON_CAPS} | (
        {tokens[0]} if tokens and tokens[0].lower() not in COMMON_CAPS else set()
    )


def select_units(
    base_kind: str, passages: list[list[str]], source: str, rng: random.Random
) -> list[Unit] | None:
    """Choose the context sentences an answer of ``base_kind`` is built from."""
    positions = [(i, j) for i, p in enumerate(passages) for j in range(len(p))]
    firsts = [(i, j) for i, j in positions if _first_ok(passages[i][j])]
    if not firsts:
        return None
    short = source == "kb"

    def following(i: int, j: int, count: int) -> list[str]:
        out: list[str] = []
        flat = [(a, b) for a, b in positions if (a, b) > (i, j)]
        for a, b in flat:
            s = passages[a][b]
            if len(out) == count:
                break
            adjacent = a == i and b == j + len(out) + 1
            related = a == i or bool(_name_tokens(s) & _name_tokens(passages[i][j]))
            if (adjacent and _later_ok(s)) or (_first_ok(s) and related):
                out.append(s)
        return out

    if base_kind in {"extractive", "paraphrase", "hedged", "numeric"}:
        predicate = _has_number if base_kind == "numeric" else (lambda s: True)
        first = _pick_first(firsts, passages, rng, predicate)
        if first is None:
            return None
        p_single = {"extractive": 1.0, "paraphrase": 0.7, "hedged": 0.65, "numeric": 0.7}
        n_units = 1 if rng.random() < p_single[base_kind] else 2
        if short and base_kind != "extractive":
            n_units = rng.choice([1, 2])
        units = [Unit([passages[first[0]][first[1]]])]
        if n_units == 2:
            nxt = following(first[0], first[1], 1)
            if base_kind == "numeric":
                nxt = [s for s in nxt if _has_number(s)]
            if not nxt:
                return None
            units.append(Unit([nxt[0]]))
        return units
    if base_kind == "multi":
        first = rng.choice(firsts)
        n_units = rng.choice([2, 2, 3, 3, 4]) if not short else rng.choice([2, 3, 4])
        rest = following(first[0], first[1], n_units - 1)
        if len(rest) < 1:
            return None
        units = [Unit([passages[first[0]][first[1]]])] + [Unit([s]) for s in rest]
        return units
    if base_kind == "synthesis":
        first = rng.choice(firsts)
        s1 = passages[first[0]][first[1]]
        others = [
            (i, j)
            for i, j in positions
            if (i, j) != first
            and (
                _first_ok(passages[i][j])
                or (i == first[0] and j == first[1] + 1 and _later_ok(passages[i][j]))
            )
        ]
        names = _name_tokens(s1)
        related = [
            (i, j)
            for i, j in others
            if names & _name_tokens(passages[i][j]) or (i == first[0] and abs(j - first[1]) == 1)
        ]
        cross = [(i, j) for i, j in related if i != first[0]]
        pool = cross if cross and rng.random() < 0.6 else related
        if not pool:
            return None
        second = rng.choice(pool)
        s2 = passages[second[0]][second[1]]
        if second < first:
            s1, s2 = s2, s1
            if not _first_ok(s1):
                return None
        units = [Unit([s1, s2], rng.choice(FUSERS))]
        if word_count(s1) + word_count(s2) > 48:
            return None
        if rng.random() < 0.2:
            extra = following(*max(first, second), 1)
            if extra:
                units.append(Unit([extra[0]]))
        return units
    raise ValueError(base_kind)


def pick_topic(sentence: str, types: dict[str, str]) -> str | None:
    """The entity a question about ``sentence`` would be about."""
    spans = find_entities(sentence, types)
    spans = [
        s
        for s in spans
        if s.etype != "NAT"
        and not (
            s.etype == "MISC"
            and " " not in s.text
            and s.text.endswith(("ans", "ese", "an", "ish", "ic"))
        )
    ]
    spans = [s for s in spans if len(s.text) > 2 and not re.search(r"-[a-z]", s.text)]
    if spans and len(sentence[: spans[0].start].split()) <= 3 and spans[0].etype != "LOC":
        return spans[0].text
    for wanted in (("PERSON", "ORG", "WORK"), ("LOC",), ("MISC",)):
        typed = [s for s in spans if s.etype in wanted and s.text not in {"US", "UK", "U.S"}]
        if typed:
            return typed[0].text
    return None


QUESTION_TEMPLATES = {
    "generic": [
        "What can you tell me about {e}?",
        "What do we know about {e}?",
        "Tell me about {e}.",
        "Can you fill me in on {e}?",
        "Give me the key facts about {e}.",
        "What's the background on {e}?",
        "What do the sources say about {e}?",
    ],
    "news": [
        "What happened with {e}?",
        "What's the latest on {e}?",
        "What does the report say about {e}?",
        "What's the story with {e}?",
    ],
    "qa": [
        "What does the passage say about {e}?",
        "Who or what is {e}?",
        "What is {e} known for?",
    ],
    "numeric": [
        "What are the key numbers on {e}?",
        "Which dates and figures are given for {e}?",
        "Give me the figures for {e}.",
        "When did this happen, and what are the numbers for {e}?",
    ],
    "multi": [
        "Can you summarise what the sources say about {e}?",
        "Give me a short summary about {e}.",
        "What are the main points about {e}?",
        "Can you give me an overview of {e}?",
    ],
    "pair": [
        "How are {e} and {f} connected?",
        "What do the sources say about {e} and {f}?",
        "What's the link between {e} and {f}?",
    ],
    "none": [
        "What's the main point here?",
        "Summarise the key facts, please.",
        "What does the document say?",
        "What's this about?",
    ],
}


def make_question(plan: ProsePlan, rng: random.Random) -> tuple[str, str | None]:
    """A natural question the base answer answers (made before any perturbation)."""
    sentences = plan.sentences()
    topic = pick_topic(sentences[0], plan.types)
    if plan.doc.source == "kb" and topic is not None:
        return kb_question(sentences[0], plan.types, rng), topic
    if topic is None:
        return rng.choice(QUESTION_TEMPLATES["none"]), None
    if plan.base_kind == "synthesis" and len(sentences) >= 2 and rng.random() < 0.6:
        other = pick_topic(sentences[1], plan.types)
        if other and other != topic and other not in topic and topic not in other:
            return rng.choice(QUESTION_TEMPLATES["pair"]).format(e=topic, f=other), topic
    if plan.base_kind == "numeric":
        return rng.choice(QUESTION_TEMPLATES["numeric"]).format(e=topic), topic
    if plan.base_kind == "multi":
        return rng.choice(QUESTION_TEMPLATES["multi"]).format(e=topic), topic
    pool = QUESTION_TEMPLATES["generic"] + QUESTION_TEMPLATES.get(plan.doc.source, [])
    return rng.choice(pool).format(e=topic), topic


def kb_question(sentence: str, types: dict[str, str], rng: random.Random) -> str:
    """Questions for the knowledge-triple sentences ('X starred in Y.')."""
    patterns = [
        (r"^(.+) starred in (.+)\.$", ["What has {0} starred in?", "Who starred in {1}?"]),
        (r"^(.+) stars (.+)\.$", ["Who is in the cast of {0}?", "What films is {1} in?"]),
        (r"^(.+) wrote (.+)\.$", ["What did {0} write?", "Who wrote {1}?"]),
        (r"^(.+) was written by (.+)\.$", ["Who wrote {0}?", "What has {1} written?"]),
        (r"^(.+) directed (.+)\.$", ["What did {0} direct?", "Who directed {1}?"]),
        (r"^(.+) was directed by (.+)\.$", ["Who directed {0}?", "What has {1} directed?"]),
        (r"^(.+) is classed as (.+)\.$", ["What genre is {0}?"]),
        (r"^(.+) was released in (.+)\.$", ["When did {0} come out?"]),
    ]
    for pattern, templates in patterns:
        m = re.match(pattern, sentence)
        if m:
            return rng.choice(templates).format(m.group(1), m.group(2)).replace("??", "?")
    return "What can you tell me about these films?"


def make_plan(doc: Doc, sources: Sources, rng: random.Random, base_kind: str) -> ProsePlan | None:
    """A label-blind answer plan of ``base_kind`` over ``doc``, or None when it does not fit."""
    chosen, contexts, types = build_contexts(doc, sources, rng)
    units = select_units(base_kind, chosen, doc.source, rng)
    if not units:
        return None
    if sum(word_count(s) for u in units for s in u.sentences) > MAX_ANSWER_WORDS:
        return None
    context_sentences = [s for c in contexts for s in split_sentences(c)]
    plan = ProsePlan(doc, contexts, context_sentences, types, units, base_kind)
    plan.question, plan.topic = make_question(plan, rng)
    # Paraphrase: required for the paraphrase kind, occasional elsewhere; never extractive.
    p_para = {"extractive": 0.0, "paraphrase": 1.0, "numeric": 0.3}.get(base_kind, 0.25)
    if rng.random() < p_para:
        total = 0
        for unit in plan.units:
            new_sentences = []
            for sentence in unit.sentences:
                new, n = paraphrase(sentence, rng, list(plan.types))
                new_sentences.append(new)
                total += n
            unit.sentences = new_sentences
        if base_kind == "paraphrase" and total == 0:
            return None
    # Framing, the same distribution whatever the label.
    if base_kind == "hedged":
        hedges = HEDGES + (NEWS_HEDGES if doc.source == "news" else [])
        plan.hedge = rng.choice(hedges)
        if plan.units[0].sentences[0].startswith("According to"):
            plan.hedge = "It appears that "
        plan.closer = rng.choice(CLOSERS) if rng.random() < 0.3 else ""
    else:
        plan.closer = rng.choice(CLOSERS) if rng.random() < 0.08 else ""
    if rng.random() < 0.07:
        plan.opener = rng.choice(OPENERS)
    return plan


# ---------------------------------------------------------------------------------------------
# Hallucinations (exactly one sentence or clause of the plan is made wrong)
# ---------------------------------------------------------------------------------------------

Slot = tuple[int, int]  # (unit index, sentence index within the unit)


@dataclass
class PerturbContext:
    """What a perturbation may look at: the plan, the corpus and the balance counters."""

    plan: ProsePlan
    sources: Sources
    rng: random.Random
    state: BalanceState

    def slots(self) -> list[Slot]:
        out = [(u, k) for u, unit in enumerate(self.plan.units) for k in range(len(unit.sentences))]
        self.rng.shuffle(out)
        return out

    def get(self, slot: Slot) -> str:
        return self.plan.units[slot[0]].sentences[slot[1]]

    def put(self, slot: Slot, text: str) -> None:
        self.plan.units[slot[0]].sentences[slot[1]] = text

    def answer_text(self) -> str:
        return " ".join(self.plan.sentences())

    def context_entities(self) -> dict[str, list[str]]:
        """Names shown in the contexts, by type, in order of appearance."""
        pool: dict[str, list[str]] = {}
        for sentence in self.plan.context_sentences:
            for span in find_entities(sentence, self.plan.types):
                if span.text.isupper() or any(ch.isdigit() for ch in span.text):
                    continue  # codes and acronyms make poor stand-ins
                names = pool.setdefault(span.etype, [])
                if span.text not in names:
                    names.append(span.text)
        return pool


def _compatible(old: str, new: str) -> bool:
    """Whether ``new`` can stand in for ``old`` (different, no shared word, similar size)."""
    a = set(old.lower().split())
    b = set(new.lower().split())
    if a & b or old in new or new in old:
        return False
    return abs(len(old.split()) - len(new.split())) <= 1


def _surnames(names: Iterable[str]) -> list[str]:
    """Last names of multi-word person names."""
    return [n.split()[-1] for n in names if " " in n and n.split()[-1][:1].isupper()]


def _external_names(ctx: PerturbContext, etype: str, n_tokens: int) -> list[str]:
    """Same-type names from neighbouring documents (when the contexts offer none)."""
    doc = ctx.plan.doc
    pool = ctx.sources.docs[doc.source]
    out: list[str] = []
    for j in ctx.sources.neighbours[doc.source].nearest(pool.index(doc), 20):
        for name, t in pool[j].types.items():
            if t == etype and len(name.split()) == n_tokens and name not in out:
                out.append(name)
    ctx.rng.shuffle(out)
    fallback: list[str] = []
    if etype == "NAT":
        fallback = [n.capitalize() for n in sorted(NATIONALITIES)]
        ctx.rng.shuffle(fallback)
    return out + fallback


def h_entity_swap(ctx: PerturbContext) -> bool:
    """Replace one name by another of the same type, from the contexts when possible."""
    answer = ctx.answer_text()
    pool = ctx.context_entities()
    for slot in ctx.slots():
        sentence = ctx.get(slot)
        spans = [
            s
            for s in find_entities(sentence, ctx.plan.types)
            if s.etype in SWAP_TYPES and s.text not in COMMON_ACRONYMS
        ]
        ctx.rng.shuffle(spans)
        for span in spans:
            names = pool.get(span.etype, [])
            if span.etype == "PERSON" and " " not in span.text:
                names = _surnames(names)
            same_size = [
                n
                for n in names
                if len(n.split()) == len(span.text.split())
                and _compatible(span.text, n)
                and n not in sentence
            ]
            same_size = [n for n in same_size if n.isupper() == span.text.isupper()]
            # names the answer does not use yet first, then names from its other sentences
            candidates = [n for n in same_size if n not in answer] or same_size
            if not candidates:
                candidates = [
                    n
                    for n in _external_names(ctx, span.etype, len(span.text.split()))
                    if _compatible(span.text, n)
                    and n not in answer
                    and n.isupper() == span.text.isupper()
                ]
            if candidates:
                new = ctx.rng.choice(candidates[:12])
                ctx.put(slot, replace_span(sentence, span.start, span.end, new))
                return True
    return False


_NUMBER_PRIORITY = {
    "int": 3,
    "year": 3,
    "decimal": 3,
    "word": 2,
    "ordinal": 2,
    "month": 2,
    "decade": 1,
    "day": 1,
    "scale": 1,
}


def h_number_change(ctx: PerturbContext) -> bool:
    """Change one number, date, month, weekday or scale word."""
    for slot in ctx.slots():
        sentence = ctx.get(slot)
        spans = find_numbers(sentence)
        if not spans:
            continue
        weights = [_NUMBER_PRIORITY[s.kind] for s in spans]
        for _ in range(4):
            span = ctx.rng.choices(spans, weights)[0]
            new = change_number(span, ctx.rng)
            if not new or new == span.text:
                continue
            if span.kind == "month" and new == "February":
                after = re.match(r" (\d+)", sentence[span.end :])
                if after and int(after.group(1)) > 28:
                    continue
            ctx.put(slot, replace_span(sentence, span.start, span.end, new))
            return True
    return False


_QUANTITY_VERBS = frozenset("rose fell rising falling increased decreased".split())


def _antonym_edits(sentence: str) -> list[tuple[int, int, str]]:
    """Possible (start, end, replacement) flips of a direction, comparison or outcome."""
    edits: list[tuple[int, int, str]] = []
    for old, new in ANTONYMS:
        for m in re.finditer(rf"(?<![\w'’-]){re.escape(old)}(?![\w'’-])", sentence):
            rest = sentence[m.end() :].lstrip().lower()
            if any(rest.startswith(b) for b in ANTONYM_BLOCKERS.get(old, ())):
                continue
            before = sentence[: m.start()].split()
            if before and before[-1].lower() in ANTONYM_PRE_BLOCKERS.get(old, ()):
                continue
            if old == "guilty" and sentence[: m.start()].endswith("not "):
                continue
            if old in _QUANTITY_VERBS and not re.match(
                r"^(?:\S+ ){0,3}?(?:by|to|from|\d|sharply|steadily)", rest
            ):
                continue
            edits.append((m.start(), m.end(), new))
    return edits


def h_contradiction(ctx: PerturbContext) -> bool:
    """Flip a direction, comparison or outcome, or add/remove a negation.

    Negations inserted and removed are kept in balance across the set, so that "not" is no
    more frequent in hallucinated answers than in factual ones.
    """
    rng = ctx.rng
    for slot in ctx.slots():
        sentence = ctx.get(slot)
        antonyms = _antonym_edits(sentence)
        removals = [(p, r) for p, r in NEGATION_REMOVALS if re.search(p, sentence)]
        insertions = [(p, r) for p, r in NEGATION_INSERTIONS if re.search(p, sentence)]
        options: list[str] = []
        if antonyms:
            options += ["antonym"] * 3
        if removals:
            options += ["remove"] * 3
        if insertions and ctx.state.not_balance <= 0:
            options += ["insert"]
        if not options:
            continue
        choice = rng.choice(options)
        if choice == "antonym":
            start, end, new = rng.choice(antonyms)
            ctx.put(slot, replace_span(sentence, start, end, new))
            if "not " in new:
                ctx.state.not_balance += 1
        elif choice == "remove":
            pattern, repl = rng.choice(removals)
            ctx.put(slot, re.sub(pattern, repl, sentence, count=1).replace("  ", " "))
            ctx.state.not_balance -= 1
        else:
            pattern, repl = rng.choice(insertions)
            ctx.put(slot, re.sub(pattern, repl, sentence, count=1))
            ctx.state.not_balance += 1
        return True
    return False


# Acting and writing are by far the most frequent relations of the knowledge triples, so they
# are swapped for each other: a swap must not make a rare relation word frequent.
_KB_RELATION_SWAPS = [
    (" starred in ", [" wrote "]),
    (" stars ", [" was written by "]),
    (" wrote ", [" starred in "]),
    (" was written by ", [" stars "]),
    (" directed ", [" wrote ", " starred in "]),
    (" was directed by ", [" was written by ", " stars "]),
]


def h_wrong_relation(ctx: PerturbContext) -> bool:
    """Right entities, wrong roles: swap two same-type names of a sentence (or the relation)."""
    for slot in ctx.slots():
        sentence = ctx.get(slot)
        if ctx.plan.doc.source == "kb":
            for old, news in _KB_RELATION_SWAPS:
                if old in sentence:
                    ctx.put(slot, sentence.replace(old, ctx.rng.choice(news), 1))
                    return True
        spans = [
            s
            for s in find_entities(sentence, ctx.plan.types)
            if s.etype in ("PERSON", "ORG", "WORK")
        ]
        pairs = [
            (a, b)
            for i, a in enumerate(spans)
            for b in spans[i + 1 :]
            if a.etype == b.etype
            and _compatible(a.text, b.text)
            and sentence[a.end : b.start].strip() not in {",", "and", ", and", "&"}
        ]
        if not pairs:
            continue
        a, b = ctx.rng.choice(pairs)
        swapped = sentence[: a.start] + b.text + sentence[a.end : b.start] + a.text
        ctx.put(slot, swapped + sentence[b.end :])
        return True
    return False


def h_conflation(ctx: PerturbContext) -> bool:
    """Mix two entities' attributes: give one entity's fact (or figure) to another."""
    rng = ctx.rng
    sentences = ctx.plan.sentences()
    modes = ["entity", "value"]
    rng.shuffle(modes)
    for mode in modes:
        for slot in ctx.slots():
            sentence = ctx.get(slot)
            if mode == "entity" and len(sentences) >= 2:
                others = " ".join(s for s in sentences if s != sentence)
                other_spans = [
                    s for s in find_entities(others, ctx.plan.types) if s.etype in SWAP_TYPES
                ]
                for span in find_entities(sentence, ctx.plan.types):
                    if span.etype not in ("PERSON", "ORG", "WORK"):
                        continue
                    candidates = [
                        o.text
                        for o in other_spans
                        if o.etype == span.etype
                        and _compatible(span.text, o.text)
                        and o.text not in sentence
                    ]
                    if candidates:
                        new = rng.choice(candidates)
                        ctx.put(slot, replace_span(sentence, span.start, span.end, new))
                        return True
            if mode == "value":
                answer = set(sentences)
                elsewhere = [s for s in ctx.plan.context_sentences if s not in answer]
                for number in find_numbers(sentence):
                    if number.kind not in ("int", "decimal", "year", "word"):
                        continue
                    values = []
                    for other in elsewhere:
                        for o in find_numbers(other):
                            if o.kind != number.kind or o.text in sentence:
                                continue
                            if number.kind == "year":
                                same_unit = abs(int(o.text) - int(number.text)) <= 15
                            else:
                                same_unit = bool(o.unit) and o.unit == number.unit
                            if same_unit:
                                values.append(o.text)
                    if values:
                        new = rng.choice(values)
                        ctx.put(slot, replace_span(sentence, number.start, number.end, new))
                        return True
    return False


def adapt_donor(
    sentence: str, donor_types: dict[str, str], ctx: PerturbContext, must_include: str | None
) -> str | None:
    """Put the contexts' names into a sentence from another document (on topic, unsupported)."""
    pool = ctx.context_entities()
    answer = ctx.answer_text()
    spans = [s for s in find_entities(sentence, donor_types) if s.etype in SWAP_TYPES]
    used: set[str] = set()
    replacements: list[tuple[Span, str]] = []
    must_type = ctx.plan.types.get(must_include, "") if must_include else ""
    for span in spans:
        if span.etype in ("LOC", "NAT") or span.text.isupper():
            continue  # places and acronyms stay as they are
        if sentence[: span.start].count("(") > sentence[: span.start].count(")"):
            continue
        names = list(pool.get(span.etype, []))
        if span.etype == "PERSON" and " " not in span.text:
            names = _surnames(names)
        names.sort(key=lambda n: (n != must_include, n not in answer, ctx.rng.random()))
        names = [n for n in names if n not in used and n.split()[-1] not in used]
        if names:
            replacements.append((span, names[0]))
            used.add(names[0])
        elif span.etype in ("PERSON", "ORG", "WORK") and ctx.plan.doc.source != "kb":
            return None
    if not replacements:
        return None
    if any(new in sentence for _, new in replacements):
        return None
    if must_include and not any(
        new == must_include and len(sentence[: span.start].split()) <= 3
        for span, new in replacements
    ):
        return None  # the question's topic must be the subject of the made-up sentence
    out = sentence
    for span, new in sorted(replacements, key=lambda r: -r[0].start):
        out = replace_span(out, span.start, span.end, new)
    if must_include and must_type and must_include not in out:
        return None
    if out in ctx.plan.context_sentences or out in ctx.plan.sentences():
        return None
    if _absent_share(out, " ".join(ctx.plan.contexts)) < 0.25:
        return None  # most of it is in the contexts: the same story told by another outlet
    if ctx.plan.doc.source == "kb":
        names = [s.text for s in find_entities(out, ctx.plan.types)]
        if any(all(n in c for n in names) for c in ctx.plan.context_sentences):
            return None
    return out


DONOR_MIN_SIMILARITY = 0.1


def _absent_share(text: str, context: str) -> float:
    """Share of the content words of ``text`` that ``context`` does not contain."""
    known = set(re.findall(r"[a-z0-9]+", context.lower()))
    content = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS]
    return sum(w not in known for w in content) / len(content) if content else 0.0


def _length_ok(sentence: str, target: str, slack: float = 0.2) -> bool:
    """Whether ``sentence`` is about as long as ``target`` (within ``slack``)."""
    n = word_count(target)
    return abs(word_count(sentence) - n) <= max(3, int(slack * n))


def unshown_sentence(
    ctx: PerturbContext, target: str, must_include: str | None, allow_pronoun: bool
) -> str | None:
    """A sentence of the same document that the contexts leave out (on topic, unsupported).

    This is what a model adds from memory or from a passage it was not given: fluent, true
    in the world, and not supported by what the user's contexts say.
    """
    doc = ctx.plan.doc
    shown = {_norm(s) for s in ctx.plan.context_sentences}
    context = " ".join(ctx.plan.contexts)
    surname = must_include.split()[-1] if must_include else ""
    candidates = [
        s
        for s in doc.sentences
        if _norm(s) not in shown
        and _length_ok(s, target, 0.35)
        and good_sentence(s, first=not allow_pronoun, min_words=4)
        and (not must_include or must_include in s or re.search(rf"\b{re.escape(surname)}\b", s))
        and _absent_share(s, context) >= 0.25
    ]
    return _closest(candidates, target, ctx.rng)


def _closest(candidates: list[str], target: str, rng: random.Random) -> str | None:
    """One of the (up to three) candidates closest in length to ``target``."""
    if not candidates:
        return None
    n = word_count(target)
    ranked = sorted(candidates, key=lambda s: (abs(word_count(s) - n), rng.random()))
    return rng.choice(ranked[:3])


def make_donor(
    ctx: PerturbContext, target: str, must_include: str | None, allow_pronoun: bool
) -> str | None:
    """An unsupported sentence about as long as ``target``.

    First a sentence of the same document that the contexts leave out; otherwise a sentence
    of a similar document with the contexts' names put in.
    """
    own = unshown_sentence(ctx, target, must_include, allow_pronoun)
    if own:
        return own
    doc = ctx.plan.doc
    pool = ctx.sources.docs[doc.source]
    near = ctx.sources.neighbours[doc.source].nearest(pool.index(doc), 20, DONOR_MIN_SIMILARITY)
    candidates: list[tuple[Doc, str]] = []
    for j in near:
        other = pool[j]
        for sentence in other.sentences:
            if not _length_ok(sentence, target):
                continue
            if "(born" in sentence or re.search(r"\s[-–]\s|\d{4}\s*[-–]\s*\d", sentence):
                continue
            if good_sentence(sentence, first=not allow_pronoun, min_words=4):
                candidates.append((other, sentence))
    ctx.rng.shuffle(candidates)
    adapted = []
    for other, sentence in candidates[:80]:
        out = adapt_donor(sentence, other.types, ctx, must_include)
        if out:
            adapted.append(out)
            if len(adapted) == 5:
                break
    return _closest(adapted, target, ctx.rng)


def h_unsupported_addition(ctx: PerturbContext) -> bool:
    """All right except one added sentence or clause (not the first) that nothing supports."""
    slots = [s for s in ctx.slots() if s != (0, 0)]
    for slot in slots:
        donor = make_donor(ctx, ctx.get(slot), None, allow_pronoun=True)
        if donor:
            ctx.put(slot, donor)
            return True
    return False


def h_fabricated(ctx: PerturbContext) -> bool:
    """The sentence that answers the question is fluent, on topic and unsupported."""
    donor = make_donor(ctx, ctx.get((0, 0)), ctx.plan.topic, allow_pronoun=False)
    if donor:
        ctx.put((0, 0), donor)
        return True
    return False


PERTURBATIONS: dict[str, Callable[[PerturbContext], bool]] = {
    "entity_swap": h_entity_swap,
    "number_change": h_number_change,
    "contradiction": h_contradiction,
    "wrong_relation": h_wrong_relation,
    "conflation": h_conflation,
    "unsupported_addition": h_unsupported_addition,
    "fabricated": h_fabricated,
}


def _norm(sentence: str) -> str:
    """Lower-cased words joined by spaces, to compare sentences."""
    return " ".join(words(sentence))


def kb_fact(sentence: str) -> tuple[str, str, str] | None:
    """(person-or-work, relation, other) of a knowledge sentence, direction-normalised."""
    patterns = [
        (r"^(.+) starred in (.+)\.$", "acted", False),
        (r"^(.+) stars (.+)\.$", "acted", True),
        (r"^(.+) wrote (.+)\.$", "wrote", False),
        (r"^(.+) was written by (.+)\.$", "wrote", True),
        (r"^(.+) directed (.+)\.$", "directed", False),
        (r"^(.+) was directed by (.+)\.$", "directed", True),
        (r"^(.+) is classed as (.+)\.$", "genre", False),
        (r"^(.+) was released in (.+)\.$", "released", False),
    ]
    for pattern, relation, reverse in patterns:
        m = re.match(pattern, sentence)
        if m:
            a, b = m.group(1), m.group(2)
            return (b, relation, a) if reverse else (a, relation, b)
    return None


def _still_wrong(ctx: PerturbContext, saved: list[Unit]) -> bool:
    """The changed sentence must not be stated in the contexts nor repeat another sentence."""
    before = [s for u in saved for s in u.sentences]
    after = ctx.plan.sentences()
    changed = [a for a, b in zip(after, before, strict=True) if a != b]
    if len(changed) != 1:
        return False
    new = changed[0]
    if len({_norm(s) for s in after}) != len(after):
        return False
    if _norm(new) in {_norm(s) for s in ctx.plan.context_sentences}:
        return False
    if ctx.plan.doc.source == "kb":
        fact = kb_fact(new)
        known = {kb_fact(s) for s in ctx.plan.context_sentences}
        if fact is None or fact in known:
            return False
    return True


def hallucinate(ctx: PerturbContext) -> str | None:
    """Apply the least-used applicable hallucination kind; returns the kind or None."""
    rng = ctx.rng
    order = sorted(PERTURBATIONS, key=lambda k: ctx.state.kinds[k] + 2.0 * rng.random())
    for kind in order:
        saved = [Unit(list(u.sentences), u.fuser) for u in ctx.plan.units]
        before = ctx.plan.render()
        if PERTURBATIONS[kind](ctx) and ctx.plan.render() != before and _still_wrong(ctx, saved):
            ctx.state.kinds[kind] += 1
            return kind
        ctx.plan.units = saved
    return None


# ---------------------------------------------------------------------------------------------
# Prose cases
# ---------------------------------------------------------------------------------------------


def load_sources(data: Path, rng: random.Random) -> Sources:
    """Prose documents from the three HaluEval dev files, with neighbour indexes."""
    docs = {
        "qa": load_qa_docs(data / "halueval_qa_dev.jsonl", rng),
        "news": load_news_docs(data / "halueval_summarization_dev.jsonl", rng),
        "kb": load_kb_docs(data / "halueval_dialogue_dev.jsonl", rng),
    }
    learn_lower_vocabulary(d.text() for pool in docs.values() for d in pool)
    return Sources(docs, {k: Neighbours(v) for k, v in docs.items()})


def perturbable(plan: ProsePlan, sources: Sources, seed: float) -> bool:
    """Whether at least one hallucination kind applies to ``plan`` (tried on a copy).

    Factual and hallucinated cases both go through this filter, so that the plans behind the
    two labels come from the same distribution.
    """
    trial = ProsePlan(
        plan.doc,
        plan.contexts,
        plan.context_sentences,
        plan.types,
        [Unit(list(u.sentences), u.fuser) for u in plan.units],
        plan.base_kind,
        plan.question,
        plan.topic,
    )
    return (
        hallucinate(PerturbContext(trial, sources, random.Random(seed), BalanceState())) is not None
    )


def matched_slots(n: int, rng: random.Random) -> list[tuple[str, str]]:
    """(label, base plan kind) per case: both labels get the very same mix of plan kinds."""
    bases = tools.allocate(n // 2, FACTUAL_PROSE_KINDS, FACTUAL_PROSE_WEIGHTS)
    slots = [(FACTUAL, b) for b in bases] + [(HALLUCINATED, b) for b in bases]
    rng.shuffle(slots)
    return slots


def build_prose_cases(
    sources: Sources, counts: dict[str, int], rng: random.Random
) -> list[dict[str, Any]]:
    """``counts[source]`` prose cases per source (even numbers), half of them hallucinated."""
    cases: list[dict[str, Any]] = []
    state = BalanceState()
    for source, n in counts.items():
        docs = list(sources.docs[source])
        rng.shuffle(docs)
        doc_iter = iter(docs * 6)
        for label, base_kind in matched_slots(n, rng):
            for doc in doc_iter:
                plan = make_plan(doc, sources, rng, base_kind)
                if plan is None or not perturbable(plan, sources, rng.random()):
                    continue
                kind = plan.base_kind
                if label == HALLUCINATED:
                    found = hallucinate(PerturbContext(plan, sources, rng, state))
                    if found is None:
                        continue
                    kind = found
                cases.append(
                    {
                        "input": plan.question,
                        "contexts": plan.contexts,
                        "output": plan.render(),
                        "label": label,
                        "kind": kind,
                        "domain": DOMAIN_OF_SOURCE[source],
                        "evidence": "prose",
                        "base": plan.base_kind,
                    }
                )
                break
            else:
                raise RuntimeError(f"ran out of {source} documents")
    return cases


# ---------------------------------------------------------------------------------------------
# Checks: can the answer alone tell the label?
# ---------------------------------------------------------------------------------------------

LIMIT_BA = 0.60


def stratified_folds(labels: Sequence[int], k: int, seed: int) -> list[int]:
    """Fold number per example, each fold with the same label mix."""
    rng = random.Random(seed)
    fold = [0] * len(labels)
    for value in sorted(set(labels)):
        idx = [i for i, y in enumerate(labels) if y == value]
        rng.shuffle(idx)
        for j, i in enumerate(idx):
            fold[i] = j % k
    return fold


def balanced_accuracy(labels: Sequence[int], predicted: Sequence[int]) -> float:
    """Mean of the true-positive and true-negative rates (1 = hallucinated)."""
    pos = [p for y, p in zip(labels, predicted, strict=True) if y == 1]
    neg = [p for y, p in zip(labels, predicted, strict=True) if y == 0]
    tpr = sum(pos) / len(pos) if pos else 0.0
    tnr = sum(1 - p for p in neg) / len(neg) if neg else 0.0
    return (tpr + tnr) / 2


def ngrams(text: str) -> list[str]:
    """Word unigrams and bigrams of a text."""
    tokens = re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())
    return tokens + [f"{a} {b}" for a, b in itertools.pairwise(tokens)]


def _tfidf(train: list[list[str]], test: list[list[str]]) -> tuple[Any, Any]:
    """TF-IDF matrices (vocabulary and idf from ``train``, rows L2-normalised)."""
    import numpy as np

    df: Counter[str] = Counter()
    for doc in train:
        df.update(set(doc))
    vocab = {t: i for i, t in enumerate(sorted(t for t, c in df.items() if c >= 2))}
    n = len(train)
    idf = np.array([math.log((1 + n) / (1 + df[t])) + 1 for t in vocab])

    def matrix(docs: list[list[str]]) -> Any:
        x = np.zeros((len(docs), len(vocab)))
        for r, doc in enumerate(docs):
            for t, c in Counter(doc).items():
                if t in vocab:
                    x[r, vocab[t]] = c
        x = x * idf
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        return x / np.maximum(norms, 1e-12)

    return matrix(train), matrix(test)


def _logistic(x: Any, y: Any, c: float, steps: int = 1500) -> tuple[Any, float]:
    """L2 logistic regression by gradient descent (rows are unit-norm TF-IDF vectors)."""
    import numpy as np

    n, d = x.shape
    w = np.zeros(d)
    b = 0.0
    lam = 1.0 / (c * n)
    lr = 2.0
    for _ in range(steps):
        z = x @ w + b
        p = 1 / (1 + np.exp(-z))
        g = p - y
        w -= lr * (x.T @ g / n + lam * w)
        b -= lr * g.mean()
    return w, b


def cv_answer_only(
    texts: list[str], labels: list[int], seed: int, model: str, c: float = 1.0
) -> float:
    """Cross-validated balanced accuracy of a bag-of-words classifier on the answer alone."""
    import numpy as np

    docs = [ngrams(t) for t in texts]
    folds = stratified_folds(labels, 5, seed)
    predicted = [0] * len(texts)
    for k in range(5):
        tr = [i for i in range(len(texts)) if folds[i] != k]
        te = [i for i in range(len(texts)) if folds[i] == k]
        xtr, xte = _tfidf([docs[i] for i in tr], [docs[i] for i in te])
        ytr = np.array([labels[i] for i in tr], dtype=float)
        if model == "logreg":
            w, b = _logistic(xtr, ytr, c)
            scores = xte @ w + b
        else:  # multinomial naive Bayes on the same (tf-idf weighted) counts
            prior = np.log(np.array([np.mean(ytr == 0), np.mean(ytr == 1)]))
            counts = np.stack([xtr[ytr == 0].sum(0), xtr[ytr == 1].sum(0)]) + 1.0
            logp = np.log(counts / counts.sum(1, keepdims=True))
            joint = xte @ logp.T + prior
            scores = joint[:, 1] - joint[:, 0]
        for i, s in zip(te, scores, strict=True):
            predicted[i] = int(s > 0)
    return balanced_accuracy(labels, predicted)


def cv_threshold(values: list[float], labels: list[int], seed: int) -> float:
    """Cross-validated balanced accuracy of the best threshold (either direction) on one number."""
    folds = stratified_folds(labels, 5, seed)
    predicted = [0] * len(values)
    for k in range(5):
        tr = [i for i in range(len(values)) if folds[i] != k]
        best = (-1.0, 0.0, 1)
        for t in sorted({values[i] for i in tr}):
            for sign in (1, -1):
                pred = [int(sign * (values[i] - t) > 0) for i in tr]
                ba = balanced_accuracy([labels[i] for i in tr], pred)
                if ba > best[0]:
                    best = (ba, t, sign)
        _, t, sign = best
        for i in range(len(values)):
            if folds[i] == k:
                predicted[i] = int(sign * (values[i] - t) > 0)
    return balanced_accuracy(labels, predicted)


def unsupported_share(case: dict[str, Any]) -> float:
    """Share of the answer's content words that appear in no context."""
    context = set(re.findall(r"[a-z0-9]+", " ".join(case["contexts"]).lower()))
    content = [w for w in re.findall(r"[a-z0-9]+", case["output"].lower()) if w not in STOPWORDS]
    if not content:
        return 0.0
    return sum(w not in context for w in content) / len(content)


def run_checks(cases: list[dict[str, Any]], seed: int) -> bool:
    """Print counts, the answer-only and length baselines, the overlap baseline and samples."""
    print(f"{len(cases)} cases")
    by = Counter((c["evidence"], c["label"]) for c in cases)
    for (evidence, label), n in sorted(by.items()):
        print(f"  {evidence:6s} {label:13s} {n}")
    print("kinds:")
    kinds = Counter((c["evidence"], c["label"], c["kind"]) for c in cases)
    for (evidence, label, kind), n in sorted(kinds.items()):
        print(f"  {evidence:6s} {label:13s} {kind:22s} {n}")
    print("domains:", dict(sorted(Counter(c["domain"] for c in cases).items())))
    ok = True
    header = (
        f"{'subset':8s} {'n':>4s} {'tfidf-LR':>9s} {'tfidf-NB':>9s} {'chars':>7s} "
        f"{'words':>7s} {'overlap':>8s}"
    )
    print(
        "\nbalanced accuracy, 5-fold cross-validated (limit for answer-only and length: "
        f"{LIMIT_BA:.2f})"
    )
    print(header)
    for name in ("all", "prose", "tool"):
        subset = [c for c in cases if name == "all" or c["evidence"] == name]
        texts = [c["output"] for c in subset]
        labels = [int(c["label"] == HALLUCINATED) for c in subset]
        lr = cv_answer_only(texts, labels, seed, "logreg")
        nb = cv_answer_only(texts, labels, seed, "nb")
        chars = cv_threshold([float(len(t)) for t in texts], labels, seed)
        nwords = cv_threshold([float(word_count(t)) for t in texts], labels, seed)
        overlap = cv_threshold([unsupported_share(c) for c in subset], labels, seed)
        print(
            f"{name:8s} {len(subset):4d} {lr:9.3f} {nb:9.3f} {chars:7.3f} {nwords:7.3f} "
            f"{overlap:8.3f}"
        )
        ok &= max(lr, nb, chars, nwords) <= LIMIT_BA
    print("answer-only and length baselines:", "OK" if ok else "TOO HIGH")
    print("\nmean answer length (words):")
    for name in ("prose", "tool"):
        for label in (FACTUAL, HALLUCINATED):
            lens = [
                word_count(c["output"])
                for c in cases
                if c["evidence"] == name and c["label"] == label
            ]
            print(f"  {name:6s} {label:13s} {sum(lens) / len(lens):6.1f}")
    rng = random.Random(seed)
    print("\nsamples:")
    for evidence in ("prose", "tool"):
        for label in (FACTUAL, HALLUCINATED):
            pool = [c for c in cases if c["evidence"] == evidence and c["label"] == label]
            for case in rng.sample(pool, 2):
                print(f"--- {case['id']} {evidence} {label} {case['kind']} ({case['domain']})")
                print(f"Q: {case['input']}")
                for ctx in case["contexts"]:
                    flat = ctx.replace("\n", " ")
                    print(f"C: {flat[:300]}{'...' if len(flat) > 300 else ''}")
                print(f"A: {case['output']}")
    return ok


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------

PROSE_COUNTS = {"qa": 170, "news": 190, "kb": 60}
TOOL_COUNT = 280
FIELDS = ["id", "input", "contexts", "output", "label", "kind", "domain", "evidence"]


def generate(data: Path, seed: int) -> list[dict[str, Any]]:
    """All cases, shuffled, with ids that reveal neither label nor kind."""
    rng = random.Random(seed)
    sources = load_sources(data, rng)
    cases = build_prose_cases(sources, PROSE_COUNTS, rng)
    cases += tools.build_tool_cases(TOOL_COUNT, random.Random(seed + 1))
    rng.shuffle(cases)
    out = []
    for i, case in enumerate(cases):
        case["id"] = f"fd{seed}-{i:04d}"
        out.append({k: case[k] for k in FIELDS})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Write the dev set and, with --check, print the checks; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="folder of the HaluEval dev files")
    parser.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--check", action="store_true", help="print counts, baselines, samples")
    args = parser.parse_args(argv)
    cases = generate(args.data, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for case in cases:
            f.write(json.dumps(case, ensure_ascii=False) + "\n")
    print(f"wrote {len(cases)} cases to {args.out}")
    if args.check:
        return 0 if run_checks(cases, args.seed) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
