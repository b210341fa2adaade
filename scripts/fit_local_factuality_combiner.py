"""Fit LocalFactuality's combiner, calibration and threshold on production-style tuning data.

    python scripts/fit_local_factuality_combiner.py --tune SYNTH/tune.jsonl \
        --data ../shared/data --model src/tracefact/models/local_factuality

``SYNTH/tune.jsonl`` comes from ``scripts/factuality_synth.py``: documents the model was
never trained on, answers written as assistants write them, a label per sentence. Through
the shipped int8 runtime (what users run):

1. per answer sentence, the feature row (`alignment.FEATURES`: the model's logit and the
   explicit checks);
2. a logistic regression of the sentence's label on that row (L2, Newton steps): the
   per-sentence combiner, fitted on the production-style sentences only;
3. Platt scaling of the answer's worst sentence together with the answer's shape
   (`config.CASE_FEATURES`) against the answer's label: the score becomes a calibrated
   probability of hallucination (reliability table and expected calibration error
   printed). The shape terms are also fitted on a balanced sample of HaluEval *train*
   answers (``--data``): summaries of one long document and dialogue turns, shapes the
   tuning data lacks, where the worst of several sentence scores runs higher by chance.
   Within a HaluEval task both labels share the shape, so these terms cannot learn its
   answer-style shortcut;
4. the threshold where balanced accuracy peaks on both sets together.

Writes ``weights``, ``bias``, ``calibration``, ``threshold`` and ``features`` into the
model's ``config.json``.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tracefact.evaluators.base import EvalCase  # noqa: E402
from tracefact.evaluators.local import LocalFactuality  # noqa: E402
from tracefact.evaluators.local.alignment import FEATURES  # noqa: E402
from tracefact.evaluators.local.config import CASE_FEATURES, case_shape  # noqa: E402


def logistic(
    x: np.ndarray, y: np.ndarray, l2: float, weights: np.ndarray | None = None
) -> np.ndarray:
    """Weights (bias last) of an L2-regularised logistic regression, by Newton's method."""
    design = np.hstack([x, np.ones((len(x), 1))])
    sample = np.ones(len(x)) if weights is None else weights
    beta = np.zeros(design.shape[1])
    penalty = np.full(design.shape[1], l2)
    penalty[-1] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-design @ beta))
        gradient = design.T @ (sample * (p - y)) + penalty * beta
        hessian = (design * (sample * p * (1 - p))[:, None]).T @ design + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta


def balanced_accuracy(labels: np.ndarray, predicted: np.ndarray) -> float:
    positives, negatives = labels == 1, labels == 0
    recall = float(predicted[positives].mean()) if positives.any() else 0.0
    specificity = float((1 - predicted[negatives]).mean()) if negatives.any() else 0.0
    return (recall + specificity) / 2


def best_threshold(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    best = (0.0, 0.5)
    for threshold in np.linspace(0.05, 0.95, 181):
        ba = balanced_accuracy(labels, (scores >= threshold).astype(float))
        if ba > best[0] + 1e-12:
            best = (ba, float(threshold))
    return best


def cascade_band(
    scores: np.ndarray, labels: np.ndarray, error: float = 0.05
) -> tuple[float, float, float, float]:
    """The uncertain band to escalate to a judge (`Cascade`).

    Below ``low`` at most ``error`` of the answers are hallucinated, at or above ``high``
    at least 1 - ``error`` are; returned with the share of answers kept outside the band
    and how many of those the local verdict gets right.
    """
    grid = np.linspace(0.0, 1.0, 101)
    low = max(
        (t for t in grid if (scores < t).any() and labels[scores < t].mean() <= error), default=0.0
    )
    high = min(
        (t for t in grid if (scores >= t).any() and labels[scores >= t].mean() >= 1 - error),
        default=1.0,
    )
    outside = (scores < low) | (scores >= high)
    right = float(((scores >= high) == (labels == 1))[outside].mean()) if outside.any() else 0.0
    return float(low), float(high), float(outside.mean()), right


def reliability(scores: np.ndarray, labels: np.ndarray, bins: int = 10) -> tuple[float, list[str]]:
    """Expected calibration error and a table of the bins."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    error, lines = 0.0, []
    for low, high in itertools.pairwise(edges):
        inside = (scores >= low) & ((scores < high) | (high == 1.0))
        if not inside.any():
            continue
        mean_score, rate = float(scores[inside].mean()), float(labels[inside].mean())
        error += inside.mean() * abs(mean_score - rate)
        lines.append(
            f"| {low:.1f}-{high:.1f} | {int(inside.sum())} | {mean_score:.3f} | {rate:.3f} |"
        )
    return float(error), lines


@dataclass
class Answers:
    """Answers read through the shipped runtime: per answer, its sentences' feature rows."""

    rows: list[list[list[float]]]
    sentence_labels: list[list[int]]
    judged: list[list[bool]]
    questions: list[str]
    labels: np.ndarray
    """1.0 for a hallucinated answer."""


def read_answers(model: LocalFactuality, records: list[dict[str, Any]]) -> Answers:
    cases = [
        EvalCase(input=r["input"], contexts=r["contexts"], output=r["output"]) for r in records
    ]
    answers = Answers([], [], [], [r["input"] for r in records], np.array([]))
    for start in range(0, len(cases), 64):
        for record, evidence in zip(
            records[start : start + 64],
            model.sentence_evidence(cases[start : start + 64]),
            strict=True,
        ):
            answers.rows.append(evidence.rows)
            answers.sentence_labels.append(record.get("sentence_labels", []))
            answers.judged.append([item.judged for item in evidence.supports])
    answers.labels = np.array([float(r["label"] == "hallucinated") for r in records])
    return answers


def halueval_sample(data: Path, per_task: int, seed: int) -> list[dict[str, Any]]:
    """Balanced HaluEval train answers per task, for the calibration's shape terms only."""
    rng = random.Random(seed)
    sample = []
    for task in ("qa", "summarization", "dialogue"):
        records = read_jsonl(data / f"halueval_{task}_train.jsonl.gz")
        records.reverse()  # the training script draws from the head of its own shuffle
        rng.shuffle(records)
        usable = [
            r for r in records if r["output"].strip() and any(c.strip() for c in r["contexts"])
        ]
        for hallucinated in (True, False):
            chosen = [r for r in usable if r["hallucinated"] is hallucinated][: per_task // 2]
            sample += [
                {**r, "label": "hallucinated" if hallucinated else "factual"} for r in chosen
            ]
    return sample


def sentence_combiner(answers: Answers, l2: float) -> tuple[np.ndarray, float]:
    """The per-sentence logistic regression, on sentences with their own labels."""
    x, y = [], []
    for rows, labels, judged in zip(
        answers.rows, answers.sentence_labels, answers.judged, strict=True
    ):
        if len(labels) != len(rows):
            continue
        for row, label, keep in zip(rows, labels, judged, strict=True):
            if keep:
                x.append(row)
                y.append(float(label))
    beta = logistic(np.array(x), np.array(y), l2)
    return beta[:-1], float(beta[-1])


def case_design(answers: Answers, weights: np.ndarray, bias: float) -> np.ndarray:
    """`CASE_FEATURES` per answer: its worst sentence's combined logit and its shape."""
    design = []
    for rows, judged, question in zip(answers.rows, answers.judged, answers.questions, strict=True):
        raws = [
            bias + float(np.dot(weights, row))
            for row, keep in zip(rows, judged, strict=True)
            if keep
        ]
        design.append((max(raws, default=-10.0), *case_shape(len(raws), question)))
    return np.array(design)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tune", type=Path, required=True)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True, help="the shared data (HaluEval train)")
    parser.add_argument("--halueval", type=int, default=400, help="HaluEval answers per task")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--l2", type=float, default=1.0)
    args = parser.parse_args()
    model = LocalFactuality(model_path=args.model)
    tune = read_answers(model, read_jsonl(args.tune))
    shapes = read_answers(model, halueval_sample(args.data, args.halueval, args.seed))
    weights, bias = sentence_combiner(tune, args.l2)
    design = np.vstack([case_design(tune, weights, bias), case_design(shapes, weights, bias)])
    case_labels = np.concatenate([tune.labels, shapes.labels])
    beta = logistic(design, case_labels, 1e-3)
    scores = 1 / (1 + np.exp(-(design @ beta[:-1] + beta[-1])))
    _, threshold = best_threshold(scores, case_labels)
    ece, table = reliability(scores, case_labels)
    print("| feature | weight |\n|---|---|")
    for name, weight in zip(FEATURES, weights, strict=True):
        print(f"| {name} | {weight:+.3f} |")
    print(f"bias {bias:+.3f}")
    print("| calibration input | weight |\n|---|---|")
    for name, weight in zip((*CASE_FEATURES, "intercept"), beta, strict=True):
        print(f"| {name} | {weight:+.3f} |")
    for name, part in (
        (args.tune.name, slice(0, len(tune.labels))),
        ("HaluEval train sample", slice(len(tune.labels), None)),
        ("both", slice(None)),
    ):
        predicted = (scores[part] >= threshold).astype(float)
        labels = case_labels[part]
        print(
            f"{name}: {len(labels)} answers, balanced accuracy "
            f"{balanced_accuracy(labels, predicted):.3f} at threshold {threshold:.3f}; caught "
            f"{predicted[labels == 1].mean():.3f}, kept {1 - predicted[labels == 0].mean():.3f}"
        )
    print(f"expected calibration error {ece:.4f}")
    print("| bin | n | mean score | hallucinated |\n|---|---|---|---|")
    print("\n".join(table))
    low, high, kept, right = cascade_band(scores, case_labels)
    print(
        f"Cascade band ({low:.2f}, {high:.2f}): the local verdict stands on {kept:.0%} of the "
        f"tuning answers, {right:.1%} of them right; the rest go to the judge"
    )
    path = args.model / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config.update(
        weights=[round(float(w), 6) for w in weights],
        bias=round(bias, 6),
        calibration=[round(float(v), 6) for v in beta],
        threshold=round(threshold, 4),
        features=list(FEATURES),
        tuned_on=f"{args.tune.name}: {len(tune.labels)} production-style answers "
        f"(scripts/factuality_synth.py); calibration also on {len(shapes.labels)} HaluEval "
        "train answers, for its shape terms",
    )
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    if not all(math.isfinite(v) for v in config["weights"] + config["calibration"]):
        raise SystemExit("the fit diverged")


if __name__ == "__main__":
    main()
