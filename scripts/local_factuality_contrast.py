"""Contrast sets and perturbations for the LocalFactuality model.

Writes, from the HaluEval dev files, JSONL files in the data's own format (so that
``tracefact eval`` can score them):

- ``context_swap_{task}.jsonl``: each faithful answer judged against its own context
  (``hallucinated: false``) and against another item's context (``true``);
- ``minimal_edit_{task}.jsonl``: a faithful answer (``false``) and the same answer with one
  name, place or number replaced by another taken from the same context (``true``).

Usage: python scripts/local_factuality_contrast.py --data ../shared/data --out DIR

The perturbation helpers are shared with ``train_local_factuality.py`` (augmentation).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

TASKS = {
    "qa": "halueval_qa",
    "summarization": "halueval_summarization",
    "dialogue": "halueval_dialogue",
}

_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w])")
_CAPITAL = re.compile(r"\b[A-Z][\w'’\-]*(?:\s+(?:of\s+|de\s+|the\s+)?[A-Z][\w'’\-]*)*")
_STOP_CAPS = frozenset(
    """a an the he she it they we i you in on at but and this that his her their its there
    after before when while as for yes no if so or our my your these those what who where
    why how then also however although though because since with from by to of mr mrs ms
    dr sir one two some many most all not monday tuesday wednesday thursday friday saturday
    sunday""".split()
)
_NEGATABLE = re.compile(
    r"\b(is|was|are|were|has|have|had|can|could|will|would|did|does|do|should)\b(?! not)"
)
_NOT = re.compile(r"\b(is|was|are|were|has|have|had|can|could|will|would|did|does|do) not\b")


def load(path: Path) -> list[dict[str, Any]]:
    if str(path).endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def items(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pair the records of each HaluEval item: input, contexts, faithful and hallucinated."""
    grouped: dict[str, dict[str, Any]] = defaultdict(dict)
    for record in records:
        key = record["id"].rsplit("-", 1)[0]
        item = grouped[key]
        item.update(key=key, task=record["task"], input=record["input"])
        item["contexts"] = record["contexts"]
        item["hallucinated" if record["hallucinated"] else "faithful"] = record["output"]
    return [
        item for _, item in sorted(grouped.items()) if "faithful" in item and "hallucinated" in item
    ]


def load_items(data: Path, task: str, split: str) -> list[dict[str, Any]]:
    suffix = "_train.jsonl.gz" if split == "train" else "_dev.jsonl"
    return items(load(data / f"{TASKS[task]}{suffix}"))


def entities(text: str) -> list[tuple[int, int, str, str]]:
    """(start, end, text, kind) of numbers and capitalised names in text."""
    found: list[tuple[int, int, str, str]] = []
    for match in _NUMBER.finditer(text):
        found.append((match.start(), match.end(), match.group(), "number"))
    for match in _CAPITAL.finditer(text):
        span = match.group()
        words = span.split()
        while words and words[0].lower().strip("'’") in _STOP_CAPS:
            words = words[1:]
        if not words:
            continue
        kept = " ".join(words)
        start = match.start() + span.index(words[0])
        if len(kept) < 2:
            continue
        found.append((start, start + len(kept), kept, "name"))
    return found


def _sentence_start(text: str, start: int) -> bool:
    before = text[:start].rstrip()
    return not before or before[-1] in ".!?\"':"


def _kind_of_number(value: str) -> str:
    digits = value.replace(",", "")
    if re.fullmatch(r"1[5-9]\d\d|20\d\d", digits):
        return "year"
    return "number"


def swap_entity(
    answer: str, context: str, rng: random.Random, from_context: bool = True
) -> tuple[str, str, str] | None:
    """Replace one name or number of the answer that the context supports.

    The replacement is another name or number (same kind) from the context, absent from
    the answer; with ``from_context=False`` numbers may also be shifted. Returns
    (new answer, old entity, new entity) or None when no such edit exists.
    """
    answer_entities = [e for e in entities(answer) if e[2] in context]
    rng.shuffle(answer_entities)
    # Single capitalised words seen only at a sentence start are often not names.
    context_entities = [
        e
        for e in entities(context)
        if e[3] == "number" or " " in e[2] or not _sentence_start(context, e[0])
    ]
    lowered_answer = answer.lower()
    for start, end, text, kind in answer_entities:
        sub_kind = _kind_of_number(text) if kind == "number" else kind
        options = sorted(
            {
                other
                for _, _, other, other_kind in context_entities
                if other_kind == kind
                and (kind != "number" or _kind_of_number(other) == sub_kind)
                and other.lower() not in lowered_answer
                and text.lower() not in other.lower()
                and other.lower() not in text.lower()
            }
        )
        same_shape = [o for o in options if len(o.split()) == len(text.split())]
        if same_shape:
            options = same_shape
        if options:
            new = rng.choice(options)
            return answer[:start] + new + answer[end:], text, new
        if not from_context and kind == "number":
            digits = text.replace(",", "")
            if digits.isdigit():
                shifted = str(int(digits) + rng.choice([-3, -2, -1, 1, 2, 3, 5, 10]))
                if shifted != digits and not shifted.startswith("-"):
                    return answer[:start] + shifted + answer[end:], text, shifted
    return None


def negate(answer: str, rng: random.Random) -> str | None:
    """Insert or remove one 'not'."""
    removable = list(_NOT.finditer(answer))
    if removable and rng.random() < 0.5:
        match = rng.choice(removable)
        return answer[: match.start()] + match.group(1) + answer[match.end() :]
    matches = list(_NEGATABLE.finditer(answer))
    if not matches:
        return None
    match = rng.choice(matches)
    return answer[: match.end()] + " not" + answer[match.end() :]


def flip_yes_no(answer: str) -> str | None:
    stripped = answer.strip().rstrip(".").lower()
    if stripped == "yes":
        return "no"
    if stripped == "no":
        return "yes"
    return None


def record(
    task: str,
    name: str,
    index: int,
    item: dict[str, Any],
    output: str,
    contexts: list[str],
    hallucinated: bool,
) -> dict[str, Any]:
    return {
        "id": f"contrast-{name}-{item['key']}-{index}",
        "source": "tracefact-contrast",
        "task": task,
        "split": "dev",
        "model": "",
        "input": item["input"],
        "contexts": contexts,
        "output": output,
        "hallucinated": hallucinated,
        "spans": [],
    }


def context_swap(items_: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for index, item in enumerate(items_):
        other = items_[(index + 1 + rng.randrange(len(items_) - 1)) % len(items_)]
        out.append(record(item["task"], "swap", 0, item, item["faithful"], item["contexts"], False))
        out.append(record(item["task"], "swap", 1, item, item["faithful"], other["contexts"], True))
    return out


def minimal_edit(items_: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in items_:
        edited = swap_entity(item["faithful"], " ".join(item["contexts"]), rng)
        if edited is None:
            continue
        out.append(record(item["task"], "edit", 0, item, item["faithful"], item["contexts"], False))
        out.append(record(item["task"], "edit", 1, item, edited[0], item["contexts"], True))
    return out


def build(data: Path, per_task: int, seed: int) -> dict[str, list[dict[str, Any]]]:
    """The contrast sets from the dev files, at most ``per_task`` items per task and set."""
    sets: dict[str, list[dict[str, Any]]] = {}
    for task in TASKS:
        rng = random.Random(f"{seed}-{task}")
        dev = load_items(data, task, "dev")
        rng.shuffle(dev)
        sets[f"context_swap_{task}"] = context_swap(dev[:per_task], rng)
        sets[f"minimal_edit_{task}"] = minimal_edit(dev, rng)[: 2 * per_task]
    return sets


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="HaluEval data directory")
    parser.add_argument("--out", type=Path, required=True, help="directory for the JSONL files")
    parser.add_argument("--per-task", type=int, default=400, help="items per task and set")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in build(args.data, args.per_task, args.seed).items():
        with open(args.out / f"{name}.jsonl", "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        positives = sum(row["hallucinated"] for row in rows)
        print(f"{name}: {len(rows)} records ({positives} hallucinated)")


if __name__ == "__main__":
    main()
