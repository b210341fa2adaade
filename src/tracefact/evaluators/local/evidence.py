"""The contexts as units of evidence: prose sentences, and tool output's records.

An answer sentence is checked against the few units that support it, never against a
whole document. Prose is cut into sentences. A context that is JSON (a tool's result:
a record, a list of records, nested objects with nulls) is flattened into one readable
line per record, ``order id: 4821; status: shipped; tracking number: not set``, with the
path of nested keys spelled out, so that a value read from the wrong record or filled in
where the tool returned null is a fact that the record's own line lacks. An ISO date or
timestamp, in any unit, is followed by the way answers write it (`_spoken`), and so is an
amount in a currency's code (`_priced`: "4820.00 GBP (£4,820)") and a field named with its
unit (`_measured`: "p95_latency_ms: 2854 (2,854 ms)"); a number is written as
answers write it too (`_amount`: "7,445" for 7445.0), and a null as "not set".
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tracefact.evaluators._text import split_sentences
from tracefact.evaluators.local.facts import MONTH_SPELLINGS

_RECORD_FIELDS = 14
"""A record with more scalar fields than this is cut into lines of this many, each
prefixed with the record's identifying fields."""
_IDENTIFYING = ("id", "name", "number", "code", "key", "ref", "reference", "title")


@dataclass(frozen=True)
class Unit:
    """One piece of evidence: a sentence, or a record's line."""

    text: str
    passage: int
    """Index of the context it comes from."""
    record: bool = False
    """A line of tool output (fields and values), not a sentence of prose."""
    summary: bool = False
    """The counts and sums of a list of records (`_summary`)."""
    state: str = ""
    """A record's state ("pending" in ``status: pending``), or the one a group line's records
    share (`_group`)."""
    group: bool = False
    """A line naming the records that share a value (`_group`), not a record itself."""


def _label(path: Sequence[str]) -> str:
    return " ".join(part.replace("_", " ").replace("-", " ") for part in path if part).strip()


def _scalar(value: Any) -> str:
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value.strip() or "none"
    return _amount(value)  # callers pass scalars (`_is_scalar`): a number is left


def _amount(value: float) -> str:
    """A number as answers write it: "7,445" for 7445.0, "2,397.52" for 2397.52.

    A whole number that may be a year ("founded": 1998) keeps no comma.
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    year = isinstance(value, int) and _YEARS[0] <= value <= _YEARS[1]
    return f"{value:,}" if abs(value) >= 1000 and not year else json.dumps(value)


_YEARS = (1800, 2100)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _fields(value: dict[str, Any], path: list[str]) -> Iterator[tuple[list[str], Any]]:
    """The scalar (and list-of-scalar) fields of a record, nested dicts spelled out."""
    for key, item in value.items():
        if _is_scalar(item):
            yield [*path, str(key)], item
        elif isinstance(item, dict):
            yield from _fields(item, [*path, str(key)])
        elif isinstance(item, list) and all(_is_scalar(x) for x in item):
            joined = ", ".join(_scalar(x) for x in item) if item else None
            yield [*path, str(key)], joined


def _identity(pairs: list[tuple[list[str], Any]]) -> str:
    for path, item in pairs:
        last = path[-1].lower() if path else ""
        if any(last == word or last.endswith(("_" + word, " " + word)) for word in _IDENTIFYING):
            return f"{_label(path)}: {_scalar(item)}"
    return ""


def _record_lines(value: Any, path: list[str]) -> Iterator[str]:
    """One line per record: its scalar fields; records nested in lists get their own."""
    if isinstance(value, dict):
        pairs = list(_fields(value, []))
        if pairs:
            identity = _identity(pairs)
            prefix = f"{_label(path)}: " if path else ""
            for start in range(0, len(pairs), _RECORD_FIELDS):
                chunk = pairs[start : start + _RECORD_FIELDS]
                text = "; ".join(f"{_label(p)}: {_scalar(v)}" for p, v in chunk)
                if start and identity:
                    text = f"{identity}; {text}"
                yield prefix + text
        for key, item in value.items():
            if isinstance(item, list) and not all(_is_scalar(x) for x in item):
                yield from _record_lines(item, [*path, str(key)])
            elif isinstance(item, dict):
                # Only lists inside nested dicts still need lines: their scalars were spelled
                # out on the parent's line.
                for inner_key, inner in item.items():
                    if isinstance(inner, list) and not all(_is_scalar(x) for x in inner):
                        yield from _record_lines(inner, [*path, str(key), str(inner_key)])
    elif isinstance(value, list):
        if all(_is_scalar(x) for x in value):
            if value:
                yield f"{_label(path) or 'items'}: " + ", ".join(_scalar(x) for x in value)
            else:
                yield f"{_label(path) or 'items'}: none"
            return
        for index, item in enumerate(value, start=1):
            yield from _record_lines(item, [*path, f"#{index}"])
    elif value is not None:
        yield f"{_label(path)}: {_scalar(value)}"


def as_json(text: str) -> tuple[str, Any] | None:
    """The label and the value of a context that is JSON, else None.

    The JSON may follow a short label: the call that produced it (``get_order(4821) ->``)
    or a time (``[10:15]``).
    """
    stripped = text.strip()
    starts = [i for i in (stripped.find("{"), stripped.find("[")) if i >= 0]
    for start in sorted(starts):
        if start > _LABEL_CHARS:
            break
        try:
            return stripped[:start].strip(), json.loads(stripped[start:])
        except ValueError:
            continue
    return None


_LABEL_CHARS = 80
"""Longest label a tool result may carry before its JSON."""
_CELLS = re.compile(r"\s*\|\s*")
_KEY = re.compile(r"[\w .\-/]{1,40}")
"""A field's name in plain-text tool output."""
_FIELD_LINE = re.compile(rf"^{_KEY.pattern}:\s*\S")
_LEAST_FIELDS = 3
"""Fields a line needs to read as a record rather than prose with colons in it."""


def _table(lines: list[str]) -> list[str] | None:
    """A pipe table (``sku | product | 168``), header first: one line per row.

    A row may leave its last cells empty (``Bluefern | team |``): they read as ``not set``.
    """
    rows = [_cells(line) for line in lines]
    width = len(rows[0])
    if len(rows) < 2 or width < 2 or any(len(row) > width for row in rows):
        return None
    rows = [row + [""] * (width - len(row)) for row in rows]
    header, body = rows[0], rows[1:]
    if any(_VALUE_CELL.search(cell) for cell in header):  # no header: the rows are values
        return ["; ".join(row) for row in rows]
    records = [{h: cell or None for h, cell in zip(header, row, strict=True)} for row in body]
    return _with_summary("", records)


_VALUE_CELL = re.compile(r"\d{3}|\d[.,:/-]\d|^\W*\d+\W*$")
"""A cell that holds a value ("2025-03-22", "8437", "TX9186332"), not a field's name
("card_last4", "p95 ms")."""


def _cells(line: str) -> list[str]:
    """A table line's cells; a pipe at either end only closes the row."""
    cells = _CELLS.split(line.strip())
    if cells and not cells[0] and line.strip().startswith("|"):
        cells = cells[1:]
    if cells and not cells[-1] and line.strip().endswith("|"):
        cells = cells[:-1] if len(cells) > 1 else cells
    return cells


def _field_records(lines: list[str]) -> list[str] | None:
    """Records of fields, one a line, after an optional heading line; with a summary line.

    ``checkout-api — state: degraded; p95 latency ms: 2233; on call: Hugo Costa``. None
    unless every line but the heading is one, and there are two or a heading names the
    call that returned one (``get_order(order_id="#100722") ->``).
    """
    heading = lines[:1] if _fields_of(lines[0]) is None else []
    records = [_fields_of(line) for line in lines[len(heading) :]]
    if len(records) < 2 - len(heading) or any(record is None for record in records):
        return None
    return heading + _with_summary("", [record for record in records if record is not None])


def _fields_of(line: str) -> dict[str, Any] | None:
    name, _, rest = line.strip().rpartition(" — ")
    pairs = [part.partition(": ") for part in rest.split("; ")]
    if len(pairs) < _LEAST_FIELDS or any(
        not sep or not _KEY.fullmatch(key.strip()) for key, sep, _ in pairs
    ):
        return None
    record: dict[str, Any] = {"name": name.strip()} if name.strip() else {}
    record.update({key.strip(): value.strip() or None for key, _, value in pairs})
    return record


def _with_summary(label: str, records: list[dict[str, Any]]) -> list[str]:
    lines = ["; ".join(f"{_label([k])}: {_scalar(v)}" for k, v in r.items()) for r in records]
    return [*lines, *_summary(label, records)] if len(records) > 1 else lines


def _summary(label: str, records: list[dict[str, Any]]) -> list[str]:
    """Lines of counts and sums of a list of records, and which records share a value.

    One summary line (`_SUMMARY_END`): how many records there are and the sum of each
    numeric field, nested ones included, what an answer that adds ("together they come to
    774.01") is checked against. Then a group line (`_group`) for each repeated short value
    of a field: how many records hold it, and which, named by the first field that tells
    them apart. A group line is not a summary line: the names and the value it holds stay
    out of other records' checks.
    """
    flat = [dict(_flat(record, ())) for record in records]
    keys = list(dict.fromkeys(key for record in flat for key in record))
    naming = next((key for key in keys if _names_records(key, flat)), None)
    ids = next((key for key in keys if _IDENTIFYING_KEY.search(key[-1])), None)
    totals = [f"{len(records)} in total"]
    groups = []
    for key in keys:
        values = [record.get(key) for record in flat]
        numbers = [_number(v) for v in values]
        if all(
            isinstance(v, str) and len(v) <= 24 and n is None
            for v, n in zip(values, numbers, strict=True)
        ):
            distinct = dict.fromkeys(values)
            repeated = 1 < len(distinct) < len(values)
            if (repeated or _STATE_KEY.search(key[-1])) and 1 < len(distinct) <= 5:
                for value in distinct:
                    members = [record for record in flat if record.get(key) == value]
                    names = [_called(r, ids, naming) for r in members] if naming != key else []
                    groups.append(
                        _group(label, _label(key), str(value), len(members), names, len(records))
                    )
        if all(n is not None for n in numbers) and not _IDENTIFYING_KEY.search(key[-1]):
            totals.append(f"{_label(key)} sum: {sum(n for n in numbers if n is not None):,.2f}")
    return [f"{label or 'records'}: " + "; ".join(totals) + _SUMMARY_END, *groups]


def _called(
    record: dict[tuple[str, ...], Any], ids: tuple[str, ...] | None, naming: tuple[str, ...] | None
) -> str:
    """How a group line names a record: its id and its name ("SUP-31810 Dashboard is down")."""
    return " ".join(str(record[key]) for key in (ids, naming) if key is not None and key in record)


def _group(label: str, key: str, value: str, count: int, names: list[str], total: int) -> str:
    """``orders with status = shipped: 2 of 5: Ana Ruiz, Omar Haddad`` (`Unit.state`)."""
    listed = f": {', '.join(names)}" if names else ""
    return f"{label or 'records'} with {key} = {value}: {count} of {total}{listed}"


_GROUP = re.compile(r" with [^=]{1,60} = (.{1,24}?): \d+ of \d+(?::|$)")
"""A `_group` line, its value captured."""
_STATE_FIELD = re.compile(r"(?:^|; |\s)(?:status|state): ([^;]{1,24}?)(?:;|$)", re.I)
"""A record line's state (``status: pending``)."""


def _flat(record: dict[str, Any], path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """A record's fields, those of nested objects under their path ("unit cost amount")."""
    for key, value in record.items():
        if isinstance(value, dict):
            yield from _flat(value, (*path, str(key)))
        else:
            yield (*path, str(key)), value


def _names_records(key: tuple[str, ...], records: list[dict[tuple[str, ...], Any]]) -> bool:
    """Whether a field's values name the records: short, distinct strings, not identifiers."""
    values = [record.get(key) for record in records]
    return (
        not _IDENTIFYING_KEY.search(key[-1])
        and all(
            isinstance(v, str) and not v.endswith(_SUMMARY_END) and len(v) <= 40 for v in values
        )
        and len(set(values)) == len(values)
    )


_SUMMARY_END = "."
"""How a summary line ends, which no record line does: `units` tells them apart by it."""
_STATE_KEY = re.compile(r"(?:^|_|\s)(?:status|state)$", re.I)
"""A field whose values are states even where every record's differs."""
_IDENTIFYING_KEY = re.compile(r"(?:^|_|\s)(?:id|number|code|ref|reference|sku)$", re.I)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        match = re.fullmatch(r"\s*[$€£]?\s*(\d[\d,]*(?:\.\d+)?)\s*(?:[A-Z]{3})?\s*", value)
        if match:
            return float(match.group(1).replace(",", ""))
    return None


def _counts(value: Any, path: list[str]) -> Iterator[str]:
    """A `_summary` line for each list of records in a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _counts(item, [*path, str(key)])
    elif isinstance(value, list) and len(value) > 1 and all(isinstance(x, dict) for x in value):
        yield from _summary(_label(path), value)


def readable(text: str) -> tuple[list[str], bool]:
    """A context as lines of evidence, and whether they are records.

    Its sentences, or its records if it is tool output (JSON, a pipe table, ``key: value``
    lines, one line of fields).
    """
    found = as_json(text)
    if found is not None:
        label, value = found
        lines = [*_record_lines(value, []), *_counts(value, [])]
        prefix = f"{label} " if label else ""
        return [prefix + line for line in lines if line.strip()], True
    lines = [line for line in text.splitlines() if line.strip()]
    piped = [i for i, line in enumerate(lines) if line.count("|") >= 1]
    if len(piped) >= 2:
        start = piped[0]
        table = _table(lines[start : piped[-1] + 1])
        if table is not None:
            return [*(lines[:start]), *table, *lines[piped[-1] + 1 :]], True
    records = _field_records(lines) if len(lines) >= 2 else None
    if records is not None:
        return records, True
    if len(lines) >= 3 and sum(bool(_FIELD_LINE.match(line)) for line in lines) >= len(lines) - 1:
        return ["; ".join(line.strip() for line in lines)], True
    sentences = split_sentences(text)
    # One line of fields ("ORD-4821 — status: shipped; total: 12.50") is a record too.
    fields = len(sentences) == 1 and sentences[0].count(": ") >= 3
    return sentences, fields


_ISO_DATE = re.compile(
    r"\b(\d{4})-(\d{2})-(\d{2})"
    r"(?:[T ](\d{2}):(\d{2})(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?(?![\w:-])"
)


def _spoken(match: re.Match[str]) -> str:
    """An ISO date (and time), then the way answers write it.

    "2025-03-04T14:50:00Z (4 March 2025, 14:50)": the model and the word checks then read
    what an answer says ("14:50 on 4 March").
    """
    year, month, day, hour, minute = match.groups()
    try:
        datetime.date(int(year), int(month), int(day))
    except ValueError:  # not a date ("2025-13-45")
        return match.group()
    said = f"{int(day)} {MONTH_SPELLINGS[int(month) - 1][0].title()} {year}"
    if hour is not None:
        said += f", {hour}:{minute}"
    return f"{match.group()} ({said})"


_CURRENCY_SIGNS = {"USD": "$", "EUR": "\u20ac", "GBP": "\u00a3"}
_MONEY = re.compile(
    r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?"  # the amount
    r"((?:;[ \w]*? currency:)? )(USD|EUR|GBP)\b"  # its currency, after it or in the next field
)


def _priced(match: re.Match[str]) -> str:
    """An amount in a currency's code, then as answers write it.

    "6305.00 GBP (\u00a36,305)", and for a tool's ``{"amount": 472.91, "currency": "EUR"}``
    "total amount: 472.91 (\u20ac472.91); total currency: EUR": the model then reads the
    amount the way an answer states it.
    """
    whole, cents, between, code = match.groups()
    said = _CURRENCY_SIGNS[code] + _said_number(whole, cents, two_places=True)
    if between.startswith(";"):  # the currency is the next field's: say it by the amount
        return f"{whole}{cents or ''} ({said}){between}{code}"
    return f"{match.group()} ({said})"


def _said_number(whole: str, decimals: str | None, two_places: bool = False) -> str:
    """A number with thousands commas and no zero decimals: "4,820", "12.5" ("12.50")."""
    decimals = decimals or ""
    if not decimals.strip(".0"):
        decimals = ""
    elif two_places:
        decimals = f"{decimals:0<3}"
    return f"{int(whole.replace(',', '')):,}{decimals}"


_UNIT_SIGNS = {"ms": " ms", "pct": "%", "percent": "%", "kg": " kg", "km": " km", "gb": " GB"}
_MEASURED = re.compile(
    r"\b(?:[a-z0-9]+[_ ])+?(ms|pct|percent|kg|km|gb): "  # a field named with its unit
    r"(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w.,])",
    re.IGNORECASE,
)


def _measured(match: re.Match[str]) -> str:
    """A field whose name ends in its unit, then its value as answers write it.

    "p95_latency_ms: 2854 (2,854 ms)", "error_rate_pct: 33.0 (33%)".
    """
    unit, whole, decimals = match.groups()
    return f"{match.group()} ({_said_number(whole, decimals)}{_UNIT_SIGNS[unit.lower()]})"


_SPOKEN_FORMS = ((_ISO_DATE, _spoken), (_MONEY, _priced), (_MEASURED, _measured))
"""Values written as tools write them, each followed by the way answers write it."""


def units(contexts: Sequence[str]) -> list[Unit]:
    """Every context's evidence lines, in order."""
    found = []
    for index, text in enumerate(contexts):
        lines, record = readable(text)
        for line in lines:
            for pattern, spoken in _SPOKEN_FORMS:
                line = pattern.sub(spoken, line)
            grouped = _GROUP.search(line) if record else None
            stated = grouped or (_STATE_FIELD.search(line) if record else None)
            state = stated.group(1).strip().lower() if stated else ""
            summary = record and line.endswith(_SUMMARY_END)
            found.append(Unit(line, index, record, summary, state, grouped is not None))
    return found
