"""The training and tuning data generator runs on the evaluator's own code.

`scripts/factuality_synth.py` reads names and facts through `tracefact.evaluators.local`;
a change there that the script no longer matches only shows when the generator runs, so
it runs here on a few made-up documents in the shape of the HaluEval train files.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tracefact.evaluators._text import split_sentences
from tracefact.evaluators.base import EvalCase
from tracefact.evaluators.local import LocalFactuality

ROOT = Path(__file__).resolve().parents[2]
TOWNS = ["Harbor Town", "Milford", "Kestrel Bay", "Ashbourne", "Lowick", "Denholm"]
PEOPLE = ["Ellen Price", "Tomas Reed", "Priya Anand", "Malcolm Reddy", "Jean Whitlow"]


def document(index: int) -> str:
    town, chair, opponent = TOWNS[index % 6], PEOPLE[index % 5], PEOPLE[(index + 2) % 5]
    return (
        f"The council of {town} approved {40 + 7 * index} new homes on Tuesday. {chair}, "
        f"who chairs the planning committee, said the scheme would open in {1995 + index}. "
        f"{opponent} opposed the plan because of traffic on the main road. The developer "
        f"agreed to pay {2 + index % 7} million pounds for a new school. Work is expected "
        f"to take around {2 + index % 3} years and will be monitored by the council."
    )


def summary(index: int) -> str:
    """A summary of `document` whose two sentences are its own, and unique to it."""
    first, second = document(index).split(". ")[:2]
    return f"{first}. {second}."


def generate(tmp_path: Path, *options: str) -> Path:
    """The generator's output folder, over 40 summarization and 40 QA documents."""
    data = tmp_path / "data"
    data.mkdir()
    for offset, stem in enumerate(["halueval_summarization", "halueval_qa"]):
        with gzip.open(data / f"{stem}_train.jsonl.gz", "wt", encoding="utf-8") as handle:
            for index in range(40):
                record = {
                    "contexts": [document(index + 40 * offset)],
                    "output": summary(index + 40 * offset),
                    "hallucinated": False,
                }
                handle.write(json.dumps(record) + "\n")
                handle.write(json.dumps({**record, "output": "-", "hallucinated": True}) + "\n")
    out = tmp_path / "out"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "factuality_synth.py"),
            *("--data", str(data), "--out", str(out), *options),
        ],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    return out


def test_the_generator_writes_both_labels_over_prose_and_tool_output(tmp_path: Path) -> None:
    out = generate(tmp_path, "--train", "60", "--tune", "20")
    train = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    tune = [json.loads(line) for line in (out / "tune.jsonl").read_text().splitlines()]
    assert (len(train), len(tune)) == (60, 20)
    made = Counter((row["label"], row["evidence"]) for row in train + tune)
    assert {key for key, count in made.items() if count} == {
        (label, evidence) for label in ("factual", "hallucinated") for evidence in ("prose", "tool")
    }
    results = LocalFactuality().evaluate_batch(
        [
            EvalCase(input=row["input"], contexts=row["contexts"], output=row["output"])
            for row in tune
        ]
    )
    assert all(0.0 <= result.score <= 1.0 for result in results)


def test_highlights_are_the_summaries_people_wrote_each_with_a_twin_one_sentence_wrong(
    tmp_path: Path,
) -> None:
    out = generate(tmp_path, "--train", "10", "--tune", "4", "--highlights", "20")
    train = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    people = [row for row in train if row["kind"].startswith("highlight")]
    assert len(train) == 30 and len(people) == 20
    summaries = {summary(index) for index in range(40)}
    for factual, twin in zip(people[::2], people[1::2], strict=True):
        assert (factual["kind"], factual["label"], twin["label"]) == (
            "highlight",
            "factual",
            "hallucinated",
        )
        assert any(factual["output"] in text for text in summaries)
        assert set(factual["sentence_labels"]) == {0} and sum(twin["sentence_labels"]) == 1
        said = split_sentences(twin["output"])
        given = " ".join(twin["contexts"])
        for sentence, label in zip(said, twin["sentence_labels"], strict=True):
            # The wrong sentence is not in the contexts (changed, or its support withheld);
            # the others are, word for word, as people wrote them.
            assert (sentence in given) is (label == 0), (twin["kind"], sentence)
        for sentence in split_sentences(factual["output"]):
            assert sentence in " ".join(factual["contexts"])
    assert {row["kind"] for row in people[1::2]} > {"highlight_withheld"}


def test_negatives_are_restated_as_answers_write_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A "not" the source writes as a verb or a prefix is restated, in grammatical forms.

    Otherwise an answer's "not" that its source does not write would come almost only from
    contradictions, and the model would learn that every such "not" is wrong.
    """
    spec = importlib.util.spec_from_file_location("synth", ROOT / "scripts" / "factuality_synth.py")
    assert spec is not None and spec.loader is not None
    synth = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "synth", synth)  # its dataclasses look themselves up
    spec.loader.exec_module(synth)
    sentence = "The council has refused to publish the report, and the cause is unclear."
    outputs = {synth.restate_negatives(sentence, random.Random(seed)) for seed in range(40)}
    assert (
        "The council has not agreed to publish the report, and the cause is not clear." in outputs
    )
    assert sentence in outputs  # not every one: a negative written as a verb stays common
    assert not any(re.search(r"\bhas (would|did)\b", output) for output in outputs)
