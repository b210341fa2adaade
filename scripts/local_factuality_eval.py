"""Evaluate LocalFactuality on the dev files, the contrast sets and a context-blind control.

    python scripts/local_factuality_eval.py --data ../shared/data --contrast DIR [--model DIR]

DIR holds the contrast sets written by ``scripts/local_factuality_contrast.py``. Prints a
markdown table of balanced accuracy and F1 (hallucinated = positive) for:
- the model;
- the same model with every context blanked (must be ~0.5 on the contrast sets);
- a word-overlap baseline: share of the answer's content words absent from the contexts,
  threshold tuned per task on the train file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts"))

import local_factuality_contrast as lfc  # noqa: E402

from tracefact.evaluators.base import EvalCase  # noqa: E402
from tracefact.evaluators.confusion import Confusion  # noqa: E402
from tracefact.evaluators.lexical import content_words  # noqa: E402
from tracefact.evaluators.local import LocalFactuality  # noqa: E402

TASK_OF = {"QA": "qa", "Summary": "summarization", "dialogue": "dialogue"}


def metrics(labels: list[int], predicted: list[int]) -> tuple[float, float]:
    """Balanced accuracy and F1, hallucinated being positive."""
    confusion = Confusion.of(zip(map(bool, labels), map(bool, predicted), strict=True))
    return confusion.balanced_accuracy, confusion.f1


def overlap_score(row: dict[str, Any]) -> float:
    known: set[str] = set()
    for context in row["contexts"]:
        known.update(content_words(context))
    words = content_words(row["output"])
    if not words:
        return 0.0
    return sum(1 for word in words if word not in known) / len(words)


def tune_overlap(rows: list[dict[str, Any]]) -> float:
    scores = [overlap_score(r) for r in rows]
    labels = [int(r["hallucinated"]) for r in rows]
    best = (-1.0, 0.5)
    for step in range(0, 101):
        threshold = step / 100
        ba, _ = metrics(labels, [int(s > threshold) for s in scores])
        if ba > best[0]:
            best = (ba, threshold)
    return best[1]


def model_predictions(
    evaluator: LocalFactuality, rows: list[dict[str, Any]], blind: bool
) -> list[int]:
    cases = [
        EvalCase(input=r["input"], contexts=["."] if blind else r["contexts"], output=r["output"])
        for r in rows
    ]
    predicted: list[int] = []
    for start in range(0, len(cases), 64):
        results = evaluator.evaluate_batch(cases[start : start + 64])
        predicted += [int(result.label == "hallucinated") for result in results]
    return predicted


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--contrast", type=Path, required=True)
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--limit", type=int, default=0, help="records per file (0 = all)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()

    evaluator = LocalFactuality(model_path=args.model) if args.model else LocalFactuality()
    thresholds = {
        task: tune_overlap(lfc.load(args.data / f"{stem}_train.jsonl.gz"))
        for task, stem in lfc.TASKS.items()
    }
    files: dict[str, list[dict[str, Any]]] = {}
    for task, stem in lfc.TASKS.items():
        files[f"dev {task}"] = lfc.load(args.data / f"{stem}_dev.jsonl")
    for kind in ("context_swap", "minimal_edit"):
        for task in lfc.TASKS:
            files[f"{kind} {task}"] = lfc.load(args.contrast / f"{kind}_{task}.jsonl")
    results: dict[str, dict[str, float]] = {}
    pooled: dict[str, dict[str, list[int]]] = {}
    print("| set | n | model BA | model F1 | blind BA | overlap BA | overlap F1 |")
    print("|---|---|---|---|---|---|---|")
    for name, rows in files.items():
        if args.limit:
            rows = rows[: args.limit]
        started = time.time()
        labels = [int(r["hallucinated"]) for r in rows]
        predicted = model_predictions(evaluator, rows, blind=False)
        blind = model_predictions(evaluator, rows, blind=True)
        lexical = [int(overlap_score(r) > thresholds[TASK_OF[r["task"]]]) for r in rows]
        kind = name.split()[0]
        bucket = pooled.setdefault(kind, {"labels": [], "model": [], "blind": [], "lexical": []})
        for key, values in (
            ("labels", labels),
            ("model", predicted),
            ("blind", blind),
            ("lexical", lexical),
        ):
            bucket[key] += values
        ba, f1 = metrics(labels, predicted)
        blind_ba, _ = metrics(labels, blind)
        lex_ba, lex_f1 = metrics(labels, lexical)
        results[name] = {
            "n": len(rows),
            "ba": ba,
            "f1": f1,
            "blind_ba": blind_ba,
            "overlap_ba": lex_ba,
            "overlap_f1": lex_f1,
            "seconds": time.time() - started,
        }
        row = (ba, f1, blind_ba, lex_ba, lex_f1)
        print(f"| {name} | {len(rows)} | " + " | ".join(f"{v:.3f}" for v in row) + " |", flush=True)
    for kind, bucket in pooled.items():
        ba, f1 = metrics(bucket["labels"], bucket["model"])
        blind_ba, _ = metrics(bucket["labels"], bucket["blind"])
        lex_ba, lex_f1 = metrics(bucket["labels"], bucket["lexical"])
        results[f"{kind} (pooled)"] = {
            "n": len(bucket["labels"]),
            "ba": ba,
            "f1": f1,
            "blind_ba": blind_ba,
            "overlap_ba": lex_ba,
            "overlap_f1": lex_f1,
        }
        row = (ba, f1, blind_ba, lex_ba, lex_f1)
        size = len(bucket["labels"])
        print(f"| {kind} (pooled) | {size} | " + " | ".join(f"{v:.3f}" for v in row) + " |")
    print(
        f"overlap thresholds (tuned on train): {thresholds}; model threshold {evaluator.threshold}"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
