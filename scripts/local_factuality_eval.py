"""Evaluate LocalFactuality: production-style sets per kind, HaluEval dev, contrast sets.

    python scripts/local_factuality_eval.py --data ../shared/data --contrast DIR \
        [--production ../shared/data/realistic_dev.jsonl --production DEVSET.jsonl] \
        [--model DIR] [--json OUT]

- ``--production`` files (the fields of ``realistic_dev.jsonl``: ``label``, ``kind``, and
  optionally ``evidence``): balanced accuracy, the share of hallucinations caught and of
  factual answers kept, per kind and per evidence type, with a word-overlap baseline (its
  threshold tuned on the same file, so an upper bound for it), the reliability table and
  the expected calibration error of the scores, and cases per second (one case per call,
  median).
- HaluEval dev files and the contrast sets of ``scripts/local_factuality_contrast.py``
  (``DIR``): balanced accuracy and F1, the same with every context blanked (must be about
  0.5 on the contrast sets), and the overlap baseline tuned on the train file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts"))

import local_factuality_contrast as lfc  # noqa: E402

from tracefact.evaluators.base import EvalCase, EvalResult  # noqa: E402
from tracefact.evaluators.confusion import Confusion  # noqa: E402
from tracefact.evaluators.lexical import content_words  # noqa: E402
from tracefact.evaluators.local import LocalFactuality  # noqa: E402

TASK_OF = {"QA": "qa", "Summary": "summarization", "dialogue": "dialogue"}


def confusion(labels: list[bool], predicted: list[bool]) -> Confusion:
    return Confusion.of(zip(labels, predicted, strict=True))


def overlap_score(row: dict[str, Any]) -> float:
    known: set[str] = set()
    for context in row["contexts"]:
        known.update(content_words(context))
    words = content_words(row["output"])
    if not words:
        return 0.0
    return sum(1 for word in words if word not in known) / len(words)


def tune_overlap(rows: list[dict[str, Any]], labels: list[bool]) -> float:
    scores = [overlap_score(r) for r in rows]
    best = (-1.0, 0.5)
    for step in range(0, 101):
        threshold = step / 100
        ba = confusion(labels, [s > threshold for s in scores]).balanced_accuracy
        if ba > best[0]:
            best = (ba, threshold)
    return best[1]


def judge(
    evaluator: LocalFactuality, rows: list[dict[str, Any]], blind: bool = False
) -> list[EvalResult]:
    cases = [
        EvalCase(input=r["input"], contexts=["."] if blind else r["contexts"], output=r["output"])
        for r in rows
    ]
    results: list[EvalResult] = []
    for start in range(0, len(cases), 64):
        results += evaluator.evaluate_batch(cases[start : start + 64])
    return results


def ece(
    scores: list[float], labels: list[bool]
) -> tuple[float, list[tuple[str, int, float, float]]]:
    bins: dict[int, list[tuple[float, bool]]] = defaultdict(list)
    for score, label in zip(scores, labels, strict=True):
        bins[min(int(score * 10), 9)].append((score, label))
    error, table = 0.0, []
    for index in sorted(bins):
        members = bins[index]
        mean = statistics.fmean(s for s, _ in members)
        rate = statistics.fmean(float(lab) for _, lab in members)
        error += len(members) / len(scores) * abs(mean - rate)
        table.append((f"{index / 10:.1f}-{(index + 1) / 10:.1f}", len(members), mean, rate))
    return error, table


def production(evaluator: LocalFactuality, path: Path) -> dict[str, Any]:
    rows = [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    labels = [r["label"] == "hallucinated" for r in rows]
    timings = []
    results = []
    for row in rows:
        started = time.perf_counter()
        results += judge(evaluator, [row])
        timings.append(time.perf_counter() - started)
    predicted = [r.label == "hallucinated" for r in results]
    threshold = tune_overlap(rows, labels)
    overlap = [overlap_score(r) > threshold for r in rows]
    print(f"\n### {path.name}: {len(rows)} cases\n")
    print("| group | n | BA | caught | kept | overlap BA |\n|---|---|---|---|---|---|")
    groups: dict[str, list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        groups["all"].append(index)
        if "evidence" in row:
            groups[f"evidence {row['evidence']}"].append(index)
    summary: dict[str, Any] = {}
    for name, members in groups.items():
        sub = confusion([labels[i] for i in members], [predicted[i] for i in members])
        lex = confusion([labels[i] for i in members], [overlap[i] for i in members])
        summary[name] = {"n": len(members), "ba": sub.balanced_accuracy, "caught": sub.recall,
                         "kept": sub.specificity, "overlap_ba": lex.balanced_accuracy}  # fmt: skip
        print(f"| {name} | {len(members)} | {sub.balanced_accuracy:.3f} | {sub.recall:.3f} | "
              f"{sub.specificity:.3f} | {lex.balanced_accuracy:.3f} |")  # fmt: skip
    print("\n| label | kind | n | right | overlap right |\n|---|---|---|---|---|")
    kinds: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        kinds[
            (
                row["label"],
                row.get("evidence", "") + (" " if "evidence" in row else "") + row["kind"],
            )
        ].append(index)
    for (label, kind), members in sorted(kinds.items()):
        right = sum(predicted[i] == labels[i] for i in members)
        lex = sum(overlap[i] == labels[i] for i in members)
        summary[f"{label} {kind}"] = {"n": len(members), "right": right, "overlap_right": lex}
        share, lex_share = right / len(members), lex / len(members)
        print(f"| {label} | {kind} | {len(members)} | {share:.0%} | {lex_share:.0%} |")
    error, table = ece([r.score for r in results], labels)
    print(f"\nexpected calibration error {error:.3f}\n")
    print("| score | n | mean score | hallucinated |\n|---|---|---|---|")
    for name, count, mean, rate in table:
        print(f"| {name} | {count} | {mean:.3f} | {rate:.3f} |")
    median = statistics.median(timings)
    print(f"\nmedian case {median * 1000:.1f} ms: {1 / median:.1f} cases/s (one case per call)")
    summary.update(ece=error, cases_per_second=1 / median)
    return summary


def halueval(evaluator: LocalFactuality, data: Path, contrast: Path, limit: int) -> dict[str, Any]:
    thresholds = {}
    for task, stem in lfc.TASKS.items():
        train = lfc.load(data / f"{stem}_train.jsonl.gz")
        thresholds[task] = tune_overlap(train, [bool(r["hallucinated"]) for r in train])
    files: dict[str, list[dict[str, Any]]] = {}
    for task, stem in lfc.TASKS.items():
        files[f"dev {task}"] = lfc.load(data / f"{stem}_dev.jsonl")
    for kind in ("context_swap", "minimal_edit"):
        for task in lfc.TASKS:
            files[f"{kind} {task}"] = lfc.load(contrast / f"{kind}_{task}.jsonl")
    results: dict[str, Any] = {}
    print("\n| set | n | BA | F1 | blind BA | overlap BA |\n|---|---|---|---|---|---|")
    for name, rows in files.items():
        rows = rows[:limit] if limit else rows
        labels = [bool(r["hallucinated"]) for r in rows]
        model = confusion(labels, [r.label == "hallucinated" for r in judge(evaluator, rows)])
        blind = confusion(
            labels, [r.label == "hallucinated" for r in judge(evaluator, rows, blind=True)]
        )
        lexical = confusion(
            labels, [overlap_score(r) > thresholds[TASK_OF[r["task"]]] for r in rows]
        )
        figures = {
            "ba": model.balanced_accuracy,
            "f1": model.f1,
            "blind_ba": blind.balanced_accuracy,
            "overlap_ba": lexical.balanced_accuracy,
        }
        results[name] = {"n": len(rows), **figures}
        print(
            f"| {name} | {len(rows)} | " + " | ".join(f"{v:.3f}" for v in figures.values()) + " |"
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=None, help="the shared data (HaluEval dev)")
    parser.add_argument("--contrast", type=Path, default=None)
    parser.add_argument("--production", type=Path, action="append", default=[])
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--limit", type=int, default=0, help="records per HaluEval file (0 = all)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    evaluator = LocalFactuality(model_path=args.model) if args.model else LocalFactuality()
    print(f"model {evaluator.describe().model}, threshold {evaluator.threshold:.3f}")
    results: dict[str, Any] = {}
    for path in args.production:
        results[path.name] = production(evaluator, path)
    if args.data and args.contrast:
        results["halueval"] = halueval(evaluator, args.data, args.contrast, args.limit)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
