"""The training and tuning data generator runs on the evaluator's own code.

`scripts/factuality_synth.py` reads names and facts through `tracefact.evaluators.local`;
a change there that the script no longer matches only shows when the generator runs, so
it runs here on a few made-up documents in the shape of the HaluEval train files.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

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


def test_the_generator_writes_both_labels_over_prose_and_tool_output(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for offset, stem in enumerate(["halueval_summarization", "halueval_qa"]):
        with gzip.open(data / f"{stem}_train.jsonl.gz", "wt", encoding="utf-8") as handle:
            for index in range(40):
                record = {"contexts": [document(index + 40 * offset)], "output": "-"}
                handle.write(json.dumps(record) + "\n")
    out = tmp_path / "out"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "factuality_synth.py"),
            *("--data", str(data), "--out", str(out), "--train", "60", "--tune", "20"),
        ],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
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
