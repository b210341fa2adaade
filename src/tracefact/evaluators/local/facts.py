"""The checkable facts of a sentence: numbers, dates, names, negation, direction.

Production hallucinations are mostly small: a number or date changed, a name swapped, a
"not" added, "before" turned into "after", two parties' roles exchanged. A model reading
a paraphrase can miss them; a literal check cannot, as long as it compares like with like.
So each sentence is reduced once to normalised facts (``9 months`` and ``nine months`` are
one value, ``3 June`` and ``2024-06-03`` one date) and `compare` says which facts of an
answer sentence its supporting evidence lacks, with a reason a person can read.
Pure Python, microseconds per sentence.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from tracefact.evaluators._text import STOPWORDS

_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19,
}  # fmt: skip
_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}  # fmt: skip
_SCALES = {
    "hundred": 1e2, "thousand": 1e3, "k": 1e3, "million": 1e6, "m": 1e6, "mn": 1e6,
    "billion": 1e9, "bn": 1e9, "b": 1e9, "trillion": 1e12,
}  # fmt: skip
_FRACTIONS = {"half": 0.5, "quarter": 0.25, "dozen": 12.0, "twice": 2.0, "double": 2.0}
MONTH_SPELLINGS = (
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
    ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
    ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
    ("december", "dec"),
)  # fmt: skip
"""Each month's spellings, in order, the full name first."""
MONTHS = {name: number for number, names in enumerate(MONTH_SPELLINGS, start=1) for name in names}
_NUMBER_WORD = "|".join(sorted([*_UNITS, *_TENS], key=len, reverse=True))
NUMBER_WORDS = frozenset([*_UNITS, *_TENS, *_FRACTIONS, "hundred", "thousand", "million"]) - {"one"}
"""Words `extract` reads as values ("seven" is 7), so a check's, not a word's, to match ("one
of them" is rarely a count, and stays a word)."""
_MONTH_WORD = "|".join(sorted(MONTHS, key=len, reverse=True))
_MONTH_NAME = re.compile(rf"\b(?:{'|'.join(name for name in MONTHS if len(name) > 3)})\b")
"""A month named without a day ("in March"): four letters or more, so never "may" or "Jan"."""

_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::\d{2})?)?")
_DAY_MONTH = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+({_MONTH_WORD})\b\.?(?:,?\s+(\d{{4}}))?", re.I
)
_MONTH_DAY = re.compile(
    rf"\b({_MONTH_WORD})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}}))?", re.I
)
_TIME = re.compile(
    r"\b(\d{1,2})(?::(\d{2}))?\s*(a\.?m\.?|p\.?m\.?)(?=\W|$)|\b(\d{1,2}):(\d{2})\b", re.I
)
_NUMERIC = re.compile(
    r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:st|nd|rd|th)?"
    r"(?:\s*(%|percent|per\s?cent))?"
    r"(?:\s*-?\s*(hundred|thousand|million|billion|trillion|bn|mn|m|k|b)\b)?",
    re.I,
)
_WORD_NUMBER = re.compile(
    rf"\b(?:({_NUMBER_WORD})(?:[-\s]({_NUMBER_WORD}))?|(half|quarter|dozen|twice|double))"
    r"(?:\s+(hundred|thousand|million|billion))?(?:\s+(percent|per\s?cent))?\b",
    re.I,
)
_VERSION = re.compile(
    r"\b[vV]?\d+(?:\.\d+){2,}\b|\b[A-Z]{1,5}-?\d{2,}\b|#\d+"
    r"|\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{4,}\b"
)
_APPROXIMATE = re.compile(
    r"\b(?:about|around|approximately|roughly|nearly|almost|some|over|more than|less than|"
    r"under|up to|at least|just over|just under|close to|~)\s*$",
    re.I,
)

NEGATIONS = frozenset(
    """not no never none nobody nothing neither nor without cannot cant can't won't wont
    isn't aren't wasn't weren't doesn't don't didn't hasn't haven't hadn't shouldn't
    wouldn't couldn't mustn't unable refused refuses refuse declined declines decline denied
    denies deny fails failed failing fail lacks lacked lacking lack unclear unknown
    unavailable impossible unlikely""".split()
)
"""Words that turn a statement's polarity (contractions as written and without apostrophe)."""


def negative(word: str) -> bool:
    """Whether a token (`tokens`) turns its statement's polarity."""
    return word in NEGATIONS or word.endswith("n't")


_OPPOSITES = [
    ("increase", "decrease"), ("increased", "decreased"), ("increases", "decreases"),
    ("rise", "fall"), ("rose", "fell"), ("risen", "fallen"), ("rises", "falls"),
    ("grew", "shrank"), ("gain", "loss"), ("gained", "lost"), ("raised", "lowered"),
    ("higher", "lower"), ("highest", "lowest"), ("more", "less"), ("more", "fewer"),
    ("most", "least"), ("greater", "smaller"), ("larger", "smaller"), ("largest", "smallest"),
    ("bigger", "smaller"), ("biggest", "smallest"),
    ("above", "below"), ("over", "under"), ("before", "after"), ("earlier", "later"),
    ("earliest", "latest"), ("first", "last"), ("maximum", "minimum"), ("up", "down"),
    ("won", "lost"), ("win", "lose"), ("wins", "loses"), ("accepted", "rejected"),
    ("approved", "rejected"), ("approved", "denied"), ("allowed", "prohibited"),
    ("allowed", "banned"), ("permitted", "prohibited"), ("allow", "prohibit"),
    ("included", "excluded"), ("including", "excluding"), ("include", "exclude"),
    ("open", "closed"), ("opened", "closed"), ("start", "end"), ("started", "ended"),
    ("bought", "sold"), ("buy", "sell"), ("buyer", "seller"), ("lender", "borrower"),
    ("landlord", "tenant"), ("employer", "employee"), ("import", "export"),
    ("imports", "exports"), ("north", "south"), ("east", "west"), ("northern", "southern"),
    ("eastern", "western"), ("inbound", "outbound"), ("positive", "negative"),
    ("success", "failure"), ("succeeded", "failed"), ("passed", "failed"), ("true", "false"),
    ("valid", "invalid"), ("enabled", "disabled"), ("enable", "disable"), ("legal", "illegal"),
    ("guilty", "innocent"), ("convicted", "acquitted"), ("arrived", "departed"),
    ("arrival", "departure"), ("older", "younger"), ("oldest", "youngest"),
    ("best", "worst"), ("required", "optional"), ("mandatory", "optional"),
    ("public", "private"), ("internal", "external"), ("full", "partial"),
    ("refund", "charge"), ("refunded", "charged"), ("added", "removed"), ("add", "remove"),
    ("upgrade", "downgrade"), ("upgraded", "downgraded"), ("cheaper", "dearer"),
    ("cheapest", "priciest"), ("faster", "slower"), ("fastest", "slowest"),
    ("long", "short"), ("longer", "shorter"), ("longest", "shortest"),
    ("always", "never"), ("all", "none"), ("increase", "cut"), ("raise", "cut"),
    ("supports", "opposes"), ("supported", "opposed"), ("for", "against"),
    ("confirmed", "denied"), ("hired", "fired"), ("joined", "left"), ("entered", "exited"),
    ("resolved", "unresolved"), ("active", "inactive"), ("available", "unavailable"),
    ("paid", "unpaid"), ("shipped", "pending"), ("delivered", "pending"), ("on", "off"),
    ("receiving", "disclosing"), ("sender", "recipient"), ("plaintiff", "defendant"),
    ("home", "away"), ("parent", "subsidiary"), ("minority", "majority"),
    ("inside", "outside"), ("within", "outside"), ("with", "without"),
    ("rising", "falling"), ("increasing", "decreasing"), ("growing", "shrinking"),
    ("gaining", "losing"), ("winning", "losing"), ("thick", "thin"), ("thicker", "thinner"),
    ("wide", "narrow"), ("wider", "narrower"), ("heavy", "light"), ("heavier", "lighter"),
    ("strong", "weak"), ("stronger", "weaker"), ("safe", "unsafe"), ("common", "rare"),
    ("commonly", "rarely"), ("often", "rarely"), ("frequent", "rare"), ("young", "old"),
    ("new", "old"), ("newer", "older"), ("early", "late"), ("cheap", "expensive"),
    ("high", "low"), ("hot", "cold"), ("warmer", "cooler"), ("more", "fewer"),
    ("forbidden", "allowed"), ("required", "forbidden"), ("must", "may"), ("accept", "reject"),
    ("agreed", "refused"), ("won", "drew"), ("upheld", "overturned"), ("dismissed", "upheld"),
    ("granted", "refused"), ("granted", "denied"), ("entry", "exit"), ("increase", "reduce"),
]  # fmt: skip
OPPOSITES: dict[str, frozenset[str]] = {}
for _left, _right in _OPPOSITES:
    OPPOSITES[_left] = OPPOSITES.get(_left, frozenset()) | {_right}
    OPPOSITES[_right] = OPPOSITES.get(_right, frozenset()) | {_left}
_DIRECTION_NEUTRAL = frozenset({"on", "for", "with", "up", "down", "over", "all", "long"})
"""Opposites too common as particles to count on their own ("log on", "for example"):
they count only as part of the aligned comparison, never as a flip by themselves."""

_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
_NAME = re.compile(r"(?<!\d)(?:[A-Z][\w'’\-]*|[A-Z]{2,})")
"""A capitalised word; not a letter written onto a number ("28E", "4K")."""


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A crude stem, enough to match "prizes" / "prize", "opened" / "opens".

    Cached: every unit and sentence of every case stems mostly the same few thousand words.
    """
    word = word.replace("’", "'").removesuffix("'s")
    if len(word) > 5 and word.endswith("ies"):
        return word[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s", "ly"):
        if len(word) - len(suffix) >= 4 and word.endswith(suffix) and not word.endswith("ss"):
            return word[: -len(suffix)]
    if len(word) == 4 and word.endswith("s") and not word.endswith(("ss", "us", "is", "as")):
        return word[:-1]  # "keys" / "key", "cars" / "car"
    return word


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens, apostrophes kept ("don't")."""
    return [token.replace("’", "'") for token in _TOKEN.findall(text.lower())]


@dataclass(frozen=True)
class Quantity:
    """A number as written and its value (``value`` of a percentage is the percentage)."""

    text: str
    value: float
    approximate: bool = False
    percent: bool = False


@dataclass
class Facts:
    """The checkable facts of one text."""

    numbers: list[Quantity] = field(default_factory=list)
    dates: set[tuple[int, int]] = field(default_factory=set)
    """(month, day) pairs; years are numbers."""
    date_texts: dict[tuple[int, int], str] = field(default_factory=dict)
    months: set[int] = field(default_factory=set)
    times: set[int] = field(default_factory=set)
    """Minutes after midnight."""
    codes: set[str] = field(default_factory=set)
    """Versions, ids and codes: ``4.7.3``, ``RP-10472``, ``#58214``."""
    names: list[str] = field(default_factory=list)
    """Capitalised words that are not only sentence-initial, lower-cased."""
    runs: list[tuple[str, ...]] = field(default_factory=list)
    """The names as written together: ``("calder", "valley", "savings")``."""
    words: list[str] = field(default_factory=list)
    negations: int = 0

    @classmethod
    def merge(cls, many: Iterable[Facts]) -> Facts:
        """The facts of several texts read as one (an anchor of two or three units)."""
        merged = cls()
        for item in many:
            merged.numbers += item.numbers
            merged.dates |= item.dates
            merged.date_texts.update(item.date_texts)
            merged.months |= item.months
            merged.times |= item.times
            merged.codes |= item.codes
            merged.names += item.names
            merged.runs += item.runs
            merged.words += item.words
            merged.negations += item.negations
        return merged

    @cached_property
    def deeds(self) -> dict[tuple[str, str], set[str]]:
        """The names written right next to each deed: ``(side, deed) -> names``.

        ``("before", "converted")``: the names right before "converted" ("Jordan Asante
        converted"); ``("after", "directed by")``: those right after it, through one small
        word as written. A list of names ("Jonah Pike and Ada Rusk") stands next to the deed
        as a whole, so a list read back in another order finds nothing. Read once per text:
        a unit's are what every sentence anchored to it is compared with.
        """
        named = set(self.names)
        joined = named | _COORDINATING  # what a list of names is made of
        words = [word.removesuffix("'s") for word in self.words]
        found: dict[tuple[str, str], set[str]] = {}

        def group(start: int, step: int) -> set[str]:
            names: set[str] = set()
            index = start
            while 0 <= index < len(words) and words[index] in joined:
                if words[index] in named:
                    names.add(words[index])
                index += step
            return names

        for index, word in enumerate(words):
            if not _deed(word, named):
                continue
            if before := group(index - 1, -1):
                found.setdefault(("before", word), set()).update(before)
            after, key = group(index + 1, 1), ("after", word)
            if not after and index + 2 < len(words) and words[index + 1] in STOPWORDS:
                after, key = group(index + 2, 1), ("after", f"{word} {words[index + 1]}")
            if after:
                found.setdefault(key, set()).update(after)
        return found

    @cached_property
    def stems(self) -> set[str]:
        """Its words' stems (`stem`)."""
        return {stem(word) for word in self.words}


def _word_value(match: re.Match[str]) -> float:
    first, second, special, scale, _ = match.groups()
    if special:
        value = _FRACTIONS[special.lower()]
    else:
        value = float(_UNITS.get(first.lower(), _TENS.get(first.lower(), 0)))
        if second:
            value += _UNITS.get(second.lower(), 0)
    if scale:
        value *= _SCALES[scale.lower()]
    return value


def _span_taken(taken: list[tuple[int, int]], start: int, end: int) -> bool:
    return any(start < e and s < end for s, e in taken)


def extract(text: str, bare: bool = False) -> Facts:
    """Reduce ``text`` to its `Facts`; a ``bare`` answer ("Paris") is all name (`name_runs`)."""
    facts = Facts()
    taken: list[tuple[int, int]] = []
    for match in _ISO_DATE.finditer(text):
        year, month, day, hour, minute = match.groups()
        if 1 <= int(month) <= 12 and 1 <= int(day) <= 31:
            facts.dates.add((int(month), int(day)))
            facts.date_texts[(int(month), int(day))] = match.group()
            facts.months.add(int(month))
            facts.numbers.append(Quantity(year, float(year)))
            if hour is not None:
                facts.times.add(int(hour) * 60 + int(minute))
            taken.append(match.span())
    for pattern, day_group, month_group in ((_DAY_MONTH, 1, 2), (_MONTH_DAY, 2, 1)):
        for match in pattern.finditer(text):
            if _span_taken(taken, *match.span()):
                continue
            day, month = int(match.group(day_group)), MONTHS[match.group(month_group).lower()]
            if 1 <= day <= 31:
                facts.dates.add((month, day))
                facts.date_texts[(month, day)] = match.group().rstrip(".,")
                if match.group(3):
                    facts.numbers.append(Quantity(match.group(3), float(match.group(3))))
                taken.append(match.span())
    for match in _TIME.finditer(text):
        if _span_taken(taken, *match.span()):
            continue
        if match.group(3):
            hour, minute = int(match.group(1)), int(match.group(2) or 0)
            hour = hour % 12 + (12 if match.group(3).lower().startswith("p") else 0)
        else:
            hour, minute = int(match.group(4)), int(match.group(5))
        if hour < 24 and minute < 60:
            facts.times.add(hour * 60 + minute)
            taken.append(match.span())
    for match in _VERSION.finditer(text):
        if not _span_taken(taken, *match.span()):
            facts.codes.add(match.group().lower().lstrip("#v"))
            taken.append(match.span())
    for match in _NUMERIC.finditer(text):
        if _span_taken(taken, *match.span()):
            continue
        raw = re.match(r"[-+]?[\d,]*\.?\d+", match.group())
        if raw is None:
            continue
        value = float(raw.group().replace(",", ""))
        if match.group(2):
            value *= _SCALES[match.group(2).lower()]
        approximate = bool(_APPROXIMATE.search(text[: match.start()]))
        percent = match.group(1) is not None
        facts.numbers.append(Quantity(match.group().strip(), value, approximate, percent))
        taken.append(match.span())
    for match in _WORD_NUMBER.finditer(text):
        if _span_taken(taken, *match.span()):
            continue
        value = _word_value(match)
        if match.group().lower() != "one":  # "one of them" is rarely a count
            approximate = bool(_APPROXIMATE.search(text[: match.start()]))
            percent = match.group(5) is not None
            facts.numbers.append(Quantity(match.group(), value, approximate, percent))
            taken.append(match.span())
    facts.months.update(MONTHS[name] for name in _MONTH_NAME.findall(text.lower()))
    facts.words = tokens(text)
    facts.negations = sum(1 for word in facts.words if negative(word))
    masked = list(text)
    for start, end in taken:  # a value is masked as digits: "28E" stays no name
        masked[start:end] = "0" * (end - start)
    facts.runs = name_runs("".join(masked), bare)
    facts.names = [word for run in facts.runs for word in run]
    return facts


def name_runs(text: str, bare: bool = False) -> list[tuple[str, ...]]:
    """Capitalised words that carry a name, lower-cased, in runs as written together.

    "Calder Valley Savings" is one run. Not a month or weekday (dates are checked as
    dates), not a number word, and not a capital that only starts a sentence ("Hope this
    helps", "Devices on 2.x"): a sentence-initial word counts only when the next word is
    capitalised too ("Calder Valley") or it appears capitalised later in the same text.
    """
    runs: list[list[str]] = []
    matches = list(_NAME.finditer(text))
    inner = {m.group().lower() for m in matches if not _starts_sentence(text, m.start())}
    last_end = -1
    for index, match in enumerate(matches):
        word = match.group()
        key = word.lower().replace("’", "'").removesuffix("'s").strip("'-")
        if not key or key in MONTHS or key in STOPWORDS or key in _WEEKDAYS:
            continue
        if key in _UNITS or key in _TENS:  # "Four AA batteries": a number, checked as one
            continue
        if key.partition("'")[0] in STOPWORDS:  # "I'm", "You're", "It's"
            continue
        if not bare and _starts_sentence(text, match.start()):
            following = matches[index + 1] if index + 1 < len(matches) else None
            joined = following is not None and text[match.end() : following.start()] == " "
            if not joined and word.lower() not in inner:
                continue
        if runs and text[last_end : match.start()] == " ":
            runs[-1].append(key)
        else:
            runs.append([key])
        last_end = match.end()
    return [tuple(run) for run in runs]


def _starts_sentence(text: str, start: int) -> bool:
    before = text[:start].rstrip()
    return not before or before[-1] in ".!?:;\"'“‘(•-–—\n"


_WEEKDAYS = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday mon tue wed thu fri sat sun".split()
)


def value_in(value: Quantity, candidates: Iterable[Quantity]) -> bool:
    """Whether ``value`` is among ``candidates`` (approximations and shares allowed)."""
    for other in candidates:
        if abs(other.value - value.value) <= 1e-9 * max(1.0, abs(value.value)):
            return True
        # "about 10 million" for 10.3 million; a percentage read as a share (0.5 / 50%).
        if (value.approximate or other.approximate) and abs(
            other.value - value.value
        ) <= 0.12 * max(abs(value.value), abs(other.value)):
            return True
        if value.percent != other.percent:  # "half" and "50%"
            share, whole = (value, other) if other.percent else (other, value)
            if abs(share.value * 100 - whole.value) <= 1e-9 * max(1.0, abs(whole.value)):
                return True
    return False


@dataclass(frozen=True)
class Finding:
    """One fact of an answer sentence that the evidence does not bear out."""

    check: str
    """``number``, ``date``, ``time``, ``code``, ``name``, ``state``, ``negation``,
    ``direction`` or ``roles``."""
    text: str
    """What the answer says (the number, name or word)."""
    reason: str


@dataclass(frozen=True)
class Claim:
    """One checkable fact of a sentence: a number, date, time, code or name."""

    check: str
    """``number``, ``date``, ``time``, ``code``, ``name`` or ``state`` (a record's shared
    value, `alignment.Evidence.states`)."""
    text: str
    """As the answer writes it."""
    key: str
    """The fact as a word of an alignment lookup, the same whichever way it is written:
    ``=4821.0``, ``@6-3``, ``@t1020``, ``#rp-10472``, ``^curie``."""
    quantity: Quantity | None = None
    date: tuple[int, int] | None = None
    minutes: int | None = None


def claims(facts: Facts) -> list[Claim]:
    """The checkable facts of a text, each once."""
    found = [Claim("number", q.text, f"={q.value:g}", q) for q in facts.numbers]
    for date in sorted(facts.dates):
        text = facts.date_texts.get(date, f"{date[1]}/{date[0]}")
        found.append(Claim("date", text, f"@{date[0]}-{date[1]}", date=date))
    for minutes in sorted(facts.times):
        text = f"{minutes // 60:02d}:{minutes % 60:02d}"
        found.append(Claim("time", text, f"@t{minutes}", minutes=minutes))
    found += [Claim("code", code, f"#{code}") for code in sorted(facts.codes)]
    found += [Claim("name", name, f"^{name}") for name in dict.fromkeys(facts.names)]
    return list({claim.key: claim for claim in found}.values())


def holds(claim: Claim, evidence: Facts, words: set[str]) -> bool:
    """Whether ``evidence`` (with its words, for names) bears the claim out."""
    if claim.quantity is not None:
        return value_in(claim.quantity, evidence.numbers)
    if claim.check == "name":
        return _name_known(claim.text, words)
    if claim.date is not None:
        return claim.date in evidence.dates
    if claim.minutes is not None:
        return claim.minutes in evidence.times
    if claim.check == "state":
        return all(part in words for part in tokens(claim.text))
    # An identifier may be written inside a longer one ("p95" in "metrics.p95_latency_ms").
    return claim.text in evidence.codes or claim.text in words


def missing(answer: Facts, evidence: Facts, words: set[str]) -> list[Finding]:
    """The claims of ``answer`` that no part of ``evidence`` bears out."""
    return [
        Finding(claim.check, claim.text, f"{claim.text!r} is in no context")
        for claim in claims(answer)
        if not holds(claim, evidence, words)
    ]


def _name_known(name: str, known: set[str]) -> bool:
    if name in known or all(part in known for part in re.split(r"[-'.]", name) if part):
        return True
    # "Curie's" ~ "curie"; an acronym or a name split differently ("RoutePilot's").
    return any(name.startswith(k) and len(k) >= 4 and len(name) - len(k) <= 3 for k in known)


def polarity_flip(answer: Facts, evidence: Facts) -> Finding | None:
    """The answer negates what its best supporting sentence states, or the reverse."""
    if (answer.negations % 2) == (evidence.negations % 2):
        return None
    if answer.negations > evidence.negations:
        cue = next(w for w in answer.words if negative(w))
        return Finding("negation", cue, f"the answer says {cue!r} where the source does not")
    return Finding("negation", "", "the source is negative where the answer is not")


def direction_flip(answer: Facts, evidence: Facts) -> Finding | None:
    """The answer uses a word whose opposite its supporting sentence uses instead.

    The opposite counts where the source uses it more often than the answer: "its capital
    and smallest city, with the largest port" against "its capital and largest city, with
    the largest port" took one "largest" away. The word with a negative prefix
    ("unavailable") is left to `polarity_flip`, which reads "not available" as the same.
    """
    said, stated = Counter(answer.words), Counter(evidence.words)
    for word in answer.words:
        if word in _DIRECTION_NEUTRAL or word in stated:
            continue
        opposite = {
            o
            for o in OPPOSITES.get(word, frozenset())
            if stated[o] > said[o] and not (o in NEGATIONS and o.endswith(word))
        }
        if opposite:
            other = sorted(opposite)[0]
            return Finding(
                "direction", word, f"the answer says {word!r} where the source says {other!r}"
            )
    return None


def roles_swapped(answer: Sequence[str], evidence: Sequence[str]) -> Finding | None:
    """Two names or role words appear in both texts, in the opposite order.

    "The receiving party must return ... to the disclosing party" read back as "the
    disclosing party must return ...": every word is in the source, the roles are not.
    """
    order = [word for word in answer if word in ROLE_WORDS]
    source = [word for word in evidence if word in ROLE_WORDS]
    first_seen: dict[str, int] = {}
    for index, word in enumerate(source):
        first_seen.setdefault(word, index)
    shared = [word for word in dict.fromkeys(order) if word in first_seen]
    for left_index, left in enumerate(shared):
        for right in shared[left_index + 1 :]:
            if first_seen[left] > first_seen[right]:
                return Finding(
                    "roles",
                    f"{left}/{right}",
                    f"{left!r} and {right!r} are in the other order there",
                )
    return None


def missing_parties(answer: Facts, evidence_words: set[str]) -> list[Finding]:
    """Parties ("the disclosing party", "the landlord") the evidence does not mention."""
    return [
        Finding("roles", word, f"the {word} is not the party named there")
        for word in dict.fromkeys(answer.words)
        if word in ROLE_WORDS and word not in evidence_words
    ]


ROLE_WORDS = frozenset(
    """buyer seller lender borrower landlord tenant employer employee receiving disclosing
    sender recipient plaintiff defendant claimant respondent customer supplier vendor
    licensor licensee insurer insured policyholder subsidiary lessor lessee assignor
    assignee guarantor creditor debtor owner owners admin admins administrator
    administrators""".split()
)
"""Words naming a party, whose order matters as names do (`roles_swapped`)."""


def rivals(claim: Claim, anchor: Facts, said: Facts) -> bool:
    """Whether ``anchor`` states a value of the claim's kind that the sentence does not.

    A number rivals a number of the same sort (a percentage another percentage); a name,
    state or anything else is taken to have a rival.
    """
    if claim.check == "number" and claim.quantity is not None:
        return any(
            q.percent == claim.quantity.percent and not value_in(q, said.numbers)
            for q in anchor.numbers
        )
    if claim.check == "date":
        return bool(anchor.dates - said.dates)
    if claim.check == "time":
        return bool(anchor.times - said.times)
    if claim.check == "code":
        return bool(anchor.codes - said.codes)
    return True


def shortened(name: str, said: Facts, anchor: Facts, evidence: Facts) -> bool:
    """Whether the sentence writes in full a name that its anchor shortens.

    "Calder Valley Savings, the smaller society" against "Calder Valley, the smaller of
    the two", where another passage names "Calder Valley Savings": the anchor's name
    begins the one the sentence writes, and that is a name of the contexts as written. A
    swapped name ("Harlow Town" for "Harlow Rovers", "Westmoor Building Society" for
    "Calder Valley Building Society") begins with no name of the anchor's own.
    """
    written = set(evidence.runs)
    short = set(anchor.runs)
    for run in said.runs:
        if name not in run[1:] or run not in written:
            continue
        if any(run[:end] in short for end in range(1, run.index(name, 1) + 1)):
            return True
    return False


def _beside(name: str, words: Sequence[str], names: set[str]) -> set[str]:
    """The stems of the content words within `_BESIDE` tokens of each place ``name`` stands."""
    near: set[str] = set()
    for index, word in enumerate(words):
        if word == name:
            window = words[max(0, index - _BESIDE) : index + _BESIDE + 1]
            near |= {stem(w) for w in window if w not in STOPWORDS and w not in names}
    return near


_BESIDE = 6
"""How far from a name a word still belongs to what is said of it."""


def said_beside(name: str, answer: Facts, source: Facts, anchor: Facts) -> bool:
    """Whether ``source`` writes ``name`` among words around it that ``anchor`` lacks.

    ``anchor``: where the rest of the sentence is. A sentence fused from several passages
    ("fell behind to a 12th-minute Callum Price header, levelled through a Jordan Asante
    penalty") names each party with its own clause: the name is not where most of the
    sentence is anchored, but its passage says the same of it ("the 12th minute through a
    header from Callum Price"). A swapped name brings none of its own passage's words
    along; where it seems to ("a German professional footballer" from another player's
    passage), the anchor has them too.
    """
    names = set(answer.names) | set(source.names)
    shared = _beside(name, answer.words, names) & _beside(name, source.words, names)
    return len(shared - anchor.stems) >= 2


_COORDINATING = frozenset({"and", "or", "&"})


def _deed(word: str, named: set[str]) -> bool:
    return len(word) > 3 and word not in STOPWORDS and word not in named


def _side(side: str, deed: str, name: str) -> str:
    return f"{name!r} {deed}" if side == "before" else f"{deed} {name!r}"


def actor_swapped(answer: Facts, source: Facts) -> Finding | None:
    """A name the answer writes next to a deed where the source writes another name.

    "Leo Hartigan converted a penalty" against "Jordan Asante converted a penalty, and Leo
    Hartigan scored twice", or "directed by Jonah Pike and starring Marta Quell" where the
    source has them the other way round: both names are in the source, the deed
    is another's. Only a name and a deed written next to each other in both texts count,
    so a paraphrase that says it otherwise ("praised by Holloway" for "Holloway praised")
    finds nothing.
    """
    named = set(source.names)
    for (side, deed), names in sorted(answer.deeds.items()):
        theirs = source.deeds.get((side, deed), set())
        for name in sorted(names & named):
            rivals = theirs - names
            if theirs and name not in theirs and rivals:
                there, here = _side(side, deed, sorted(rivals)[0]), _side(side, deed, name)
                return Finding("roles", name, f"{there} there, not {here}")
    return None


_RELATIONS = {
    form: relation
    for relation, forms in {
        "wrote": "wrote written writes authored penned",
        "starred": "starred stars starring acted",
        "directed": "directed directs directing",
        "produced": "produced produces producing",
        "composed": "composed composes",
        "founded": "founded founds",
    }.items()
    for form in forms.split()
}
"""Relations between a person and a work that exclude one another where a source names one:
"wrote" where the source says "starred in" is another relation, not a paraphrase."""


def relation_changed(answer: Facts, source: Facts, elsewhere: frozenset[str]) -> Finding | None:
    """The right names with a deed the source gives them nowhere, taken from elsewhere.

    "Nora Vale starred in Low Tide" against "Nora Vale wrote Low Tide" where another passage
    has "Ivo Brandt starred in North Pier" (``elsewhere``: the words next to a name in any
    passage): the names are right, the relation between them is another passage's. A deed
    no context writes next to a name ("appeared in") is a paraphrase, left to the model;
    but a relation of `_RELATIONS` is changed wherever the source gives the name another of
    them and not this one, on either side ("Peter Greene wrote Training Day" against "Peter
    Greene starred in Training Day", or "Little Women was written by Ada Rusk" against
    "Ada Rusk starred in Little Women").
    """
    named = set(source.names)
    deeds_of: dict[str, set[tuple[str, str]]] = {}
    for (side, deed), names in source.deeds.items():
        for name in names:
            deeds_of.setdefault(name, set()).add((side, deed))
    for (side, deed), names in sorted(answer.deeds.items()):
        verb = deed.split()[0]
        relation = _RELATIONS.get(verb)
        if stem(verb) in source.stems or (relation is None and verb not in elsewhere):
            continue
        for name in sorted(names & named):
            given = deeds_of.get(name, set())
            theirs = {
                (their_side, other)
                for their_side, other in given
                if stem(other.split()[0]) not in answer.stems
            }
            if relation is None:
                rivals = {(s, other) for s, other in theirs if s == side}
            else:
                if relation in {_RELATIONS.get(other.split()[0]) for _, other in given}:
                    continue  # "wrote" for "was written by": the same relation, turned round
                rivals = {(s, other) for s, other in theirs if _RELATIONS.get(other.split()[0])}
            if rivals:
                their_side, other = sorted(rivals)[0]
                return Finding(
                    "roles",
                    deed,
                    f"{_side(their_side, other, name)} there, not {_side(side, deed, name)}",
                )
    return None
