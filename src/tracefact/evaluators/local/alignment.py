"""Which evidence supports an answer sentence, and what of the sentence it lacks.

Each answer sentence is aligned to the few units of evidence (`evidence.units`) that
cover its words best: the best unit, then whichever adds most of what is still
uncovered (a sentence fused from two sources needs both). The explicit checks of
`facts` run against those units and against all the evidence: a name or number found
nowhere is invented; one found elsewhere but not where the sentence is anchored was
taken from the wrong place (a swapped name, a conflated value, the wrong record). The
model then reads the sentence beside its ranked evidence (`plan`).
Pure Python, microseconds per sentence.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from tracefact.evaluators._text import STOPWORDS, split_sentences
from tracefact.evaluators.local import facts as checks
from tracefact.evaluators.local.evidence import Unit, units
from tracefact.evaluators.local.facts import Facts, Finding, stem

FEATURES = (
    "model_logit",
    "missing_words",
    "missing_words_aligned",
    "missing_numbers",
    "missing_numbers_aligned",
    "missing_names",
    "missing_names_aligned",
    "fused_values",
    "displaced_where_supported",
    "negation_added",
    "negation_dropped",
    "direction_flip",
    "roles",
    "states",
    "bare_unsupported",
    "support",
    "copied",
)
"""Names of the per-sentence features, in the order of `SentenceSupport.row`."""

_ALIGNED = 3
"""Most units a sentence is anchored to."""
_ADDS = 0.2
"""Least share of the sentence's weight a further unit must add to join the anchor."""
_JOIN_WORDS = 4
"""A unit adding less still joins where it brings this many of the sentence's words and
half of `_ADDS`: a long sentence fused from three passages draws under `_ADDS` from each,
while one value taken from another passage never joins."""
_QUESTION_WORDS = 24
"""Only the end of a long question or dialogue history counts as known words."""
_LEANING_WEIGHT = 0.25


_CONNECTIVES = frozenset(
    """therefore thus hence however instead though although whereas meanwhile moreover
    furthermore indeed rather""".split()
)
"""Words that join claims without making one: a restatement adds them freely."""
_NOT = frozenset({"cannot", "cant", "wont", "never"})
"""Negations that are no word of their own: "can't" restates "cannot"."""
_NOT_CONTENT = STOPWORDS | _CONNECTIVES | checks.NUMBER_WORDS | _NOT
"""Tokens `content` leaves out, one set looked up once per token."""


def content(text: str) -> list[str]:
    """Stemmed content words of ``text``.

    No stopwords or connectives, no numbers in digits or words (checked as values), no
    negation that is no word of its own (`_NOT`, "n't": polarity is checked apart).
    """
    return [
        stem(word)
        for word in checks.tokens(text)
        if word not in _NOT_CONTENT and not word[0].isdigit() and not word.endswith("n't")
    ]


@dataclass
class Evidence:
    """A case's evidence, read once: units with their words and facts, and word weights."""

    units: list[Unit]
    words: list[set[str]]
    facts: list[Facts]
    idf: dict[str, float]
    all_words: set[str]
    all_tokens: set[str]
    """Every word of the evidence, unstemmed: where a name of the answer is looked up."""
    all_facts: Facts
    states: frozenset[str]
    """The states of the evidence's records ("shipped", "on time"; `Unit.state`): a state
    a sentence reports is a claim, checked where the sentence is anchored."""
    deeds: frozenset[str]
    """The words written next to a name anywhere in the evidence (`Facts.deeds`): the
    relations a sentence could borrow from another passage (`facts.relation_changed`)."""
    records: bool
    """Whether any unit is a tool's record."""
    totals: frozenset[str]
    """Values only a list's summary line states (its sums): a sentence stating one is
    about that line."""

    @classmethod
    def of(cls, contexts: Sequence[str]) -> Evidence:
        found = units(contexts)
        facts = [checks.extract(unit.text) for unit in found]
        claims = [checks.claims(f) for f in facts]
        words = [
            set(content(u.text)) | {c.key for c in cs} for u, cs in zip(found, claims, strict=True)
        ]
        frequency: Counter[str] = Counter(w for ws in words for w in ws)
        count = max(1, len(found))
        idf = {w: math.log(1.0 + count / n) for w, n in frequency.items()}
        merged = Facts.merge(facts)
        states = frozenset(unit.state for unit in found if unit.state)
        deeds = frozenset(deed.split()[0] for item in facts for _, deed in item.deeds)
        # A list's count is on its group lines too: only its sums are on one line alone.
        numbers = [
            (unit.summary, {c.key for c in cs if c.check == "number"})
            for unit, cs in zip(found, claims, strict=True)
        ]
        summed = set().union(*(keys for summary, keys in numbers if summary))
        listed = set().union(*(keys for summary, keys in numbers if not summary))
        return cls(
            found,
            words,
            facts,
            idf,
            set().union(*words),
            set(merged.words),
            merged,
            states,
            deeds,
            any(unit.record for unit in found),
            frozenset(summed - listed),
        )

    def weight(self, word: str) -> float:
        return self.idf.get(word, math.log(2.0 + len(self.units)))

    def ranked(self, words: Sequence[str], leaning: Sequence[str] = ()) -> list[tuple[float, int]]:
        """(share of the words' weight a unit covers, unit index), best first.

        ``leaning`` (the previous sentence's words, for one that opens with "It") count a
        quarter, so that they break ties without pulling the sentence to its neighbour.
        """
        weights = {w: _LEANING_WEIGHT * self.weight(w) for w in leaning}
        weights.update({w: self.weight(w) for w in words})
        total = sum(weights.values()) or 1.0
        # fsum: a unit's words are a set, iterated in an order the hash seed decides; a
        # plain sum's last bits (and so ties, and the anchor) would change per process.
        scores = [
            (math.fsum(weights[w] for w in unit_words if w in weights) / total, index)
            for index, unit_words in enumerate(self.words)
        ]
        # On a tie the later unit wins: a later tool result supersedes an earlier one.
        return sorted(scores, key=lambda pair: (-pair[0], -pair[1]))

    def lists_of(self, units: Sequence[int], groups: bool = False) -> list[int]:
        """The summary lines of the lists these units are in (and their group lines).

        Counts and sums of a list (`evidence._summary`) belong to every record of it.
        """
        passages = {self.units[i].passage for i in units}
        return [
            i
            for i, unit in enumerate(self.units)
            if (unit.summary or (groups and unit.group)) and unit.passage in passages
        ]


@dataclass
class SentenceSupport:
    """One answer sentence against its evidence: the anchor, the findings, the features."""

    sentence: str
    ranked: list[int]
    """Unit indices, best supporting first (what the model reads, within its budget)."""
    aligned: list[int]
    """The units the sentence is anchored to."""
    findings: list[Finding] = field(default_factory=list)
    """What the anchor lacks (numbers, names, negation, direction, roles)."""
    row: list[float] = field(default_factory=list)
    """`FEATURES` minus the model's logit."""
    judged: bool = True
    """False for a sentence that claims nothing ("Hope this helps!", "Yes.")."""


def topic_overlap(evidence: Evidence, question: str, answer: str) -> float:
    """The larger share of the question's or the answer's words and values in the evidence.

    Near 0 when the contexts are about another subject (retrieval brought back the wrong
    documents): the calibration's ``off_topic`` term (`config.case_terms`). Values count
    as the evidence writes them ("$20" is "20 USD"); a case of fewer than `_TOPIC_WORDS`
    words and values ("What's the price?" "$20.") tells too little to be called off topic.
    """
    asked, said = _topic_words(question), _topic_words(answer)
    if len(asked | said) < _TOPIC_WORDS:
        return 1.0
    return max(len(words & evidence.all_words) / len(words) for words in (asked, said) if words)


_TOPIC_WORDS = 3


def _topic_words(text: str) -> set[str]:
    return set(content(text)) | {claim.key for claim in checks.claims(checks.extract(text))}


def _anchor(evidence: Evidence, words: list[str], ranked: list[tuple[float, int]]) -> list[int]:
    """The best unit, then each unit that adds enough of the sentence's weight.

    Enough is `_ADDS`, or half that in at least `_JOIN_WORDS` of its words.
    """
    if not ranked or ranked[0][0] <= 0.0:
        return []
    wanted = set(words)
    total = math.fsum(evidence.weight(w) for w in wanted) or 1.0
    chosen = [ranked[0][1]]
    covered = wanted & evidence.words[ranked[0][1]]
    while len(chosen) < _ALIGNED:
        uncovered = wanted - covered
        gains = []
        for _, i in ranked[: 4 * _ALIGNED]:
            if i in chosen:
                continue
            added = uncovered & evidence.words[i]
            gains.append((math.fsum(evidence.weight(w) for w in added) / total, len(added), i))
        if not gains:
            break
        gain, count, best = max(gains)
        if gain < _ADDS and not (count >= _JOIN_WORDS and gain >= _ADDS / 2):
            break
        chosen.append(best)
        covered |= evidence.words[best]
    return chosen


def _share_missing(words: Sequence[str], present: set[str], evidence: Evidence) -> float:
    if not words:
        return 0.0
    total = sum(evidence.weight(w) for w in words)
    missing = sum(evidence.weight(w) for w in words if w not in present)
    return missing / total if total else 0.0


def support(evidence: Evidence, question: str, sentences: Sequence[str]) -> list[SentenceSupport]:
    """Each answer sentence aligned to its evidence, with its findings and feature row.

    Names and numbers the question gave are the user's, not claims of the answer.
    """
    asked = _Question.of(question)
    copied = copied_shares([unit.text for unit in evidence.units], sentences)
    results = []
    previous: list[str] = []
    for sentence, copy_share in zip(sentences, copied, strict=True):
        results.append(_sentence(evidence, asked, sentence, copy_share, previous))
        previous = content(sentence)
    return results


@dataclass(frozen=True)
class _Question:
    """What the question gives: words that are known, names and numbers that are not claims."""

    words: set[str]
    facts: Facts
    names: list[str]
    """The names and ids it asks about, as evidence words: the record a sentence that
    names none is about."""

    @classmethod
    def of(cls, question: str) -> _Question:
        tokens = checks.tokens(question)[-_QUESTION_WORDS * 2 :]
        facts = checks.extract(question)
        # An id it asks about is a word as the evidence writes it ("#100722"), too.
        codes = _code_words(facts)
        names = sorted({stem(name) for name in facts.names} | codes)
        return cls({stem(w) for w in tokens if w not in STOPWORDS} | codes, facts, names)


def _sentence(
    evidence: Evidence, asked: _Question, sentence: str, copy_share: float, previous: list[str]
) -> SentenceSupport:
    plain = content(sentence)
    short = len({w for w in plain if w not in asked.words}) < _SHORT
    # Only a few words ("Brown.", "The Beatles") are all name, even at the start.
    sentence_facts = checks.extract(sentence, bare=short and len(checks.tokens(sentence)) <= _BARE)
    words = plain + sorted(_code_words(sentence_facts))
    own = [w for w in words if w not in asked.words]
    # A short answer ("Warsaw.") is anchored where the question's words are too, and what
    # it says is its claim even where the question offered it ("Brown or Yale?" "Brown").
    lookup = words + sorted(asked.words) if short else words
    # A bare value is checked against all the evidence: the question, not the answer,
    # says where it belongs, and the question may need several sentences to answer.
    known = set() if short else asked.words
    if short:
        own = words
    if evidence.records and not (sentence_facts.names or sentence_facts.codes):
        # "The subscription's next invoice is due on March 9": the record asked about.
        lookup = [*lookup, *asked.names]
    if evidence.totals:  # "Together, the five orders come to 3,334.67": the list's sum line
        lookup = [
            *lookup,
            *(c.key for c in checks.claims(sentence_facts) if c.key in evidence.totals),
        ]
    leaning = previous if _leans_back(sentence) else []
    ranked = evidence.ranked(lookup, leaning)
    aligned = _anchor(evidence, lookup, ranked)
    claims = sentence_facts if short else _claims(sentence_facts, asked.facts)
    nowhere = checks.missing(claims, evidence.all_facts, evidence.all_tokens)
    # A claim found in the contexts, but not where the rest of the sentence is anchored,
    # was taken from the wrong place: a swapped name, a conflated value, the wrong record.
    stated = _states(evidence, sentence)
    nowhere += [
        checks.Finding("state", claim.text, f"no record in the contexts is {claim.text!r}")
        for claim in stated
        if not checks.holds(claim, evidence.all_facts, evidence.all_tokens)
    ]
    keys = {claim.key: claim for claim in [*checks.claims(claims), *stated]}
    said = Facts.merge([sentence_facts, asked.facts])
    placed = {
        claim: (
            _placed_near_question(evidence, claim, sorted(asked.words), said)
            if short
            else _placed_where_anchored(
                evidence, claim, [*lookup, *keys], leaning, said, sentence_facts
            )
        )
        for claim in keys.values()
        if claim.text not in {f.text for f in nowhere}
    }
    misplaced = [
        checks.Finding(claim.check, claim.text, _PLACEMENT_REASONS[place].format(claim.text))
        for claim, place in placed.items()
        if place != HELD
    ]
    added = {claim.text for claim, place in placed.items() if place == ADDED}
    anchor = Facts.merge(evidence.facts[i] for i in aligned)
    anchor_tokens = set(anchor.words) | set(asked.facts.names)
    best = evidence.facts[aligned[0]] if aligned else Facts()
    coverage = ranked[0][0] if ranked else 0.0
    # A record's line holds many fields, one of them perhaps null ("not set"): its polarity
    # is not a statement's, nor is a field's name before a value a deed.
    prose = bool(aligned) and not evidence.units[aligned[0]].record
    parties = checks.missing_parties(claims, anchor_tokens)
    if coverage >= _CLOSE:
        parties += [f for f in [checks.roles_swapped(claims.words, best.words)] if f]
        if prose:
            deeds = (
                checks.actor_swapped(sentence_facts, best),
                checks.relation_changed(sentence_facts, best, evidence.deeds),
            )
            parties += [f for f in deeds if f]
    negation = checks.polarity_flip(claims, best) if coverage >= _CLOSE and prose else None
    direction = checks.direction_flip(claims, anchor) if coverage >= _NEAR else None
    flips = [flip for flip in (negation, direction) if flip is not None]
    findings = [*nowhere, *misplaced, *parties, *flips]
    anchor_words = set().union(*(evidence.words[i] for i in aligned)) if aligned else set()
    if short:
        anchor_words = evidence.all_words
    unsupported = _share_missing(own, evidence.all_words | known, evidence)
    row = [
        unsupported,
        _share_missing(own, anchor_words | known, evidence),
        _count([f for f in nowhere if f.check in _NUMERIC_CHECKS]),
        _count([f for f in findings if f.check in _NUMERIC_CHECKS and f.text not in added]),
        _count([f for f in nowhere if f.check == "name"]),
        _count([f for f in findings if f.check == "name"]),
        _count([f for f in misplaced if f.text in added]),
        # A value swapped into a sentence its passage otherwise bears out is a surer sign
        # than one in a sentence anchored loosely, where the anchor itself may be wrong.
        coverage * _count([f for f in misplaced if f.text not in added]),
        float(negation is not None and claims.negations > best.negations),
        float(negation is not None and claims.negations < best.negations),
        float(direction is not None),
        _count(parties),
        _count([f for f in [*nowhere, *misplaced] if f.check == "state"]),
        # A bare answer ("Warsaw.") that no context mentions: the retrieval was about
        # something else, whatever the model makes of it.
        float(short and (bool(nowhere) or unsupported >= 1.0)),
        coverage,
        copy_share,
    ]
    judged = not _claims_nothing(sentence) and bool(words or claims.numbers or claims.dates)
    return SentenceSupport(sentence, [i for _, i in ranked], aligned, findings, row, judged)


def _states(evidence: Evidence, sentence: str) -> list[checks.Claim]:
    """The states a sentence says records are in, where the evidence has records in states.

    Those the records hold (`Evidence.states`) and common ones they do not (`STATE_WORDS`):
    a status flipped to one no record has ("boarding") is as wrong as one taken from
    another record.
    """
    if not evidence.states:
        return []
    said = " ".join(checks.tokens(sentence))
    found = []
    for state in sorted(evidence.states | STATE_WORDS):
        phrase = _STATE_PHRASES.get(state) or " ".join(checks.tokens(state))
        # Most states are nowhere in the sentence: the pattern needs " phrase", so a
        # substring test spares their regex.
        if f" {phrase}" in said and re.search(_STATED.format(re.escape(phrase)), said):
            found.append(checks.Claim("state", state, f"~{phrase.replace(' ', '-')}"))
    return found


_STATED = (
    r"\b(?:is|are|was|were|be|been|as|now|still|currently|remains?|stays?|shows?) {}\b"
    r"(?! (?:to|by|for|with|via|using)\b)"
)
"""A state said of something ("is pending", "are now cancelled"), not a verb ("is
scheduled to leave", "was returned by the courier", "is paid with a Visa")."""


STATE_WORDS = frozenset(
    """active inactive cancelled canceled pending shipped delivered paused boarding delayed
    declined posted refunded approved rejected open closed resolved completed failed
    succeeded trialing suspended expired scheduled confirmed diverted degraded operational
    healthy processing returned dispatched departed landed overdue paid unpaid draft
    archived escalated acknowledged rescheduled investigating identified monitoring""".split()
) | {"on time", "in transit", "past due", "on hold", "in progress"}
"""States tool records commonly report, looked for in a sentence over records."""
_STATE_PHRASES = {state: " ".join(checks.tokens(state)) for state in STATE_WORDS}
"""`STATE_WORDS` as the tokens a sentence is searched by, tokenised once."""


HELD = "held"
"""A claim the units its sentence is anchored to bear out."""
DISPLACED = "displaced"
"""A claim found elsewhere in the evidence, where the anchor states another value of its
kind: swapped in for that value (a swapped name, a conflated value, the wrong record)."""
ADDED = "added"
"""A number, date, time or code found elsewhere, where the anchor states no other value of
its kind: the sentence may fuse two sources ("... 3% target; it was 7.4% in September"),
or bring a value from an unrelated one. Names are always `DISPLACED`: a passage nearly
always names something the sentence does not, so the test would tell nothing there."""
_PLACEMENT_REASONS = {
    DISPLACED: "{!r} is in the contexts, but not where this is said",
    ADDED: "{!r} is in the contexts, but in another passage than the rest of this",
}


def _placed_near_question(
    evidence: Evidence, claim: checks.Claim, question: list[str], said: Facts
) -> str:
    """Whether a bare answer's value ("Paris") is in one of the units the question points to.

    A question may need several sentences to answer ("When was the choreographer of X
    born?"), so any of the few units that share its words will do; a question that shares
    none with the contexts leaves nothing to place the value by. A record a later result
    replaced is no longer so (`_latest`), and a value must be in the records the answer or
    question names (`_held_by_named_records`).
    """
    scores = [(score, i) for score, i in evidence.ranked(question) if score > 0]
    # On a tie a record comes before the lines that group records by a value: they share
    # its words, and would crowd it out.
    scores.sort(key=lambda pair: (-pair[0], evidence.units[pair[1]].group))
    ranked = [i for _, i in scores[:_NEAR_QUESTION]]
    if not ranked:
        return HELD
    facts = Facts.merge(evidence.facts[i] for i in _latest(evidence, sorted(ranked)))
    if not checks.holds(claim, facts, set(facts.words)):
        return DISPLACED
    return _held_by_named_records(evidence, claim, said)


_NEAR_QUESTION = 3
"""How many of the units that share the question's words a bare answer may come from."""


def _held_by_named_records(evidence: Evidence, claim: checks.Claim, said: Facts) -> str:
    """`DISPLACED` where a value is in none of the records the sentence or question names.

    "Amara Esposito's leave starts on April 24", April 24 being Greta Iqbal's: records
    share their fields' names, so a value read from the wrong record pulls the sentence's
    anchor (or a bare answer's units) to that record; the name or id given says which
    record it is about; a name no record holds as one ("HX" of "Flight HX 1977") names the
    one record that writes it, when only one does. The counts and groups of their lists
    belong to each of them. `HELD` where no record is named, and for claims that are not
    values.
    """
    if claim.check not in _RECORD_VALUES or not evidence.records:
        return HELD
    given = [c for c in checks.claims(said) if c.check in ("name", "code")]
    names = {c.key for c in given} - {claim.key}
    records = [
        i
        for i, unit in enumerate(evidence.units)
        if unit.record and not (unit.summary or unit.group)
    ]
    named = [i for i in records if names & evidence.words[i]]
    if not named:  # "Flight HX 1977": a name written so in one record alone
        for text in {c.text for c in given if c.check == "name"}:
            written = re.compile(rf"\b{re.escape(text)}\b", re.I)
            holders = [i for i in records if written.search(evidence.units[i].text)]
            if len(holders) == 1:
                named += holders
    if not named:
        return HELD
    facts = Facts.merge(evidence.facts[i] for i in [*named, *evidence.lists_of(named, True)])
    return HELD if checks.holds(claim, facts, set(facts.words)) else DISPLACED


_RECORD_VALUES = frozenset({"number", "date", "time", "code"})
"""Claims a wrong record may supply (a name is placed by the anchor as it is)."""


def _placed_where_anchored(
    evidence: Evidence,
    claim: checks.Claim,
    lookup: list[str],
    leaning: list[str],
    said: Facts,
    written: Facts,
) -> str:
    """Where a claim stands against the units the sentence anchors to without it.

    `HELD` where they bear it out; else `DISPLACED` where it displaces a value of the best
    of them, `ADDED` where it adds one. ``said``: the values the sentence and its question
    state, which displace nothing; ``written``, the sentence's own. A record's value is
    always displaced: the record has that field.

    The claim's own word (and the rest of its name) is left out of the lookup, so that a
    value taken from the wrong sentence or record does not pull the anchor there. A name
    the anchor writes short is held where the sentence writes it in full (`facts.shortened`),
    and so is one that its own passage writes with the words around it (`facts.said_beside`).
    Counts and sums of a list (`evidence._summary`) belong to every record of it; a
    sentence anchored nowhere is checked against everything, so nothing of it is
    misplaced. A value held there must also be in the records the sentence names
    (`_held_by_named_records`).
    """
    left_out = {claim.key, stem(claim.text)}
    if claim.check == "name":  # the rest of its name ("Heritage Group") would pull too
        run = next((run for run in said.runs if claim.text in run), ())
        left_out |= {f"^{word}" for word in run} | {stem(word) for word in run}
    rest = [w for w in lookup if w not in left_out]
    ranked = evidence.ranked(rest, leaning)
    aligned = _anchor(evidence, rest, ranked)
    if not aligned:
        return HELD
    best = aligned[0]
    # Units about as well supported as the best count too: a list of names taken from
    # several records ("Ana and Omar are confirmed") is anchored to each of them.
    aligned += [i for score, i in ranked if score >= _COMPARABLE * ranked[0][0]]
    aligned = _latest(evidence, sorted(set(aligned)))
    facts = Facts.merge(evidence.facts[i] for i in [*aligned, *evidence.lists_of(aligned)])
    if checks.holds(claim, facts, set(facts.words)):
        return _held_by_named_records(evidence, claim, said)
    if claim.check == "name" and (
        checks.shortened(claim.text, said, facts, evidence.all_facts)
        or any(
            checks.said_beside(claim.text, written, unit, facts)
            for unit in evidence.facts
            if claim.text in unit.names
        )
    ):
        return HELD
    if evidence.units[best].record or checks.rivals(claim, evidence.facts[best], said):
        return DISPLACED
    return ADDED


_SOCIAL = re.compile(
    r"^\W*(?:yes|no|sure|okay|ok|thanks?(?: you)?(?: for [\w ]+)?|hope (?:this|that|it) helps"
    r"(?: you[\w ]*)?|hope [\w ]*(?:sorted|helps|well)[\w ]*|let me know[\w ,]*|happy to "
    r"help[\w ,]*|good luck[\w ,]*|glad to help[\w ,]*|great question|i hope this helps"
    r"[\w ]*)\W*$",
    re.I,
)
"""A sentence that only answers yes or no, thanks, or signs off claims nothing to check."""
_CHAT_WORDS = frozenset(
    """i've here's let's let know need detail details question asking ask thanks thank
    waiting wait hope helps help happy glad dig look looked checked check found part depth
    clears clear answers answer good great sure okay ok yes anything else""".split()
)
"""Words of what an assistant says about the conversation ("I've checked.", "Here's what I
found.", "Happy to dig further."): a sentence of these and small words alone claims
nothing either."""


_ABSTAINS = re.compile(
    r"^\W*(?:sorry,?\s*)?(?:i (?:do not|don't|did not|didn't) know|i(?:'m| am) not sure"
    r"|i (?:could not|couldn't|can't|cannot|was unable to|am unable to) "
    r"(?:find|answer|tell|say|see|confirm)"
    r"|(?:the |these |those )?(?:provided |given |retrieved |available )?(?:documents?|contexts?"
    r"|passages?|sources?|information|results?|records?|excerpts?|text|article|tool output) "
    r"(?:provided |given |i have )?(?:do not|don't|does not|doesn't|did not|didn't|never) "
    r"(?:cover|mention|say|state|specify|include|contain|address|discuss|indicate|give|list)"
    r"|there (?:is|was) no (?:information|mention|record))\b(?![^.!?]*(?:\bbut\b|;))",
    re.I,
)
"""A sentence that only says the answer is not known or not in the sources ("I couldn't
find anything about gift card refunds in the documents.") claims nothing about the
subject; one that goes on ("..., but it is probably X") is judged."""
_YES_OR_NO = re.compile(r"^\W*(?:yes|no)\W*$", re.I)


def yes_or_no(sentences: Sequence[str]) -> bool:
    """Whether the whole answer is a bare yes or no, which claims what the question asks."""
    return len(sentences) == 1 and bool(_YES_OR_NO.match(sentences[0]))


def _claims_nothing(sentence: str) -> bool:
    if _SOCIAL.match(sentence) or _ABSTAINS.match(sentence):
        return True
    return all(word in STOPWORDS or word in _CHAT_WORDS for word in checks.tokens(sentence))


_SHORT = 3
"""Fewer content words of its own than this, and a sentence is anchored with the question."""
_BARE = 5
"""Most words of a short answer that is read as all name ("The Beatles.")."""
_CLOSE = 0.5
"""Least share of a sentence's weight its best unit must cover before polarity and roles
are compared with that unit: below it the two may not be saying the same thing at all."""
_NEAR = 0.3
"""The same for direction words, which are specific enough to compare on looser anchors."""
_COMPARABLE = 0.75
"""Share of the best unit's support at which another unit counts as an anchor too."""
_NUMERIC_CHECKS = frozenset({"number", "date", "time", "code"})
_LEANING = re.compile(r"^(?:he|she|it|they|this|that|these|those|his|her|its|their)\b", re.I)


def _latest(evidence: Evidence, indices: list[int]) -> list[int]:
    """The units without the records a later result of the same record replaced.

    Two tool results about the same thing (most fields equal) at different times: what the
    earlier one says is no longer so.
    """
    kept = []
    for position, index in enumerate(indices):
        unit, words = evidence.units[index], evidence.words[index]
        replaced = unit.record and any(
            evidence.units[later].record
            and evidence.units[later].passage != unit.passage
            and len(words & evidence.words[later])
            >= _SAME_RECORD * len(words | evidence.words[later])
            for later in indices[position + 1 :]
        )
        if not replaced:
            kept.append(index)
    return kept


_SAME_RECORD = 0.6
"""Share of their words two records must share to be one record at two times."""


def _code_words(facts: Facts) -> set[str]:
    """An id or code ("ORD-4821", "#58214") as a word.

    It names the record a sentence is about, so it anchors the sentence there.
    """
    return {f"#{code}" for code in facts.codes}


def _count(findings: Sequence[Finding]) -> float:
    return float(min(len(findings), 2))


def _leans_back(sentence: str) -> bool:
    return bool(_LEANING.match(sentence.strip()))


def _claims(sentence: Facts, question: Facts) -> Facts:
    """The sentence's facts minus the names and numbers the question gave."""
    kept = Facts(**{**sentence.__dict__})
    kept.names = [name for name in sentence.names if name not in question.names]
    kept.numbers = [n for n in sentence.numbers if not checks.value_in(n, question.numbers)]
    kept.dates = sentence.dates - question.dates
    return kept


# ---------------------------------------------------------------- copies

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
