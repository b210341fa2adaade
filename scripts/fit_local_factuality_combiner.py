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
4. the weight of ``off_topic`` alone (the contexts are about something else), the other
   calibration inputs held: on faithful HaluEval *train* answers read against their own
   contexts (factual) and another item's (hallucinated; ``--swaps`` items per task, as
   ``local_factuality_contrast.py`` swaps the dev items). The other sets hardly ever
   have such contexts, so they could not weigh it, and fitting the rest on these pairs
   too would shift HaluEval's base rates into the production-style shape terms;
5. the threshold where balanced accuracy peaks on the tuning and HaluEval answers.

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
sys.path.insert(0, str(ROOT / "scripts"))

import local_factuality_contrast as lfc  # noqa: E402

from tracefact.evaluators.base import EvalCase  # noqa: E402
from tracefact.evaluators.local import LocalFactuality  # noqa: E402
from tracefact.evaluators.local.alignment import FEATURES  # noqa: E402
from tracefact.evaluators.local.config import CASE_FEATURES, case_terms  # noqa: E402
from tracefact.evaluators.local.evaluator import NOT_READ  # noqa: E402


def logistic(
    x: np.ndarray,
    y: np.ndarray,
    l2: float,
    weights: np.ndarray | None = None,
    offset: np.ndarray | float = 0.0,
    intercept: bool = True,
) -> np.ndarray:
    """Weights of an L2-regularised logistic regression, by Newton's method.

    Of ``y`` on ``x`` plus a fixed ``offset``; the bias comes last, where ``intercept``.
    """
    design = np.hstack([x, np.ones((len(x), 1))]) if intercept else x
    sample = np.ones(len(x)) if weights is None else weights
    beta = np.zeros(design.shape[1])
    penalty = np.full(design.shape[1], l2)
    if intercept:
        penalty[-1] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-(design @ beta + offset)))
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
    topic_overlaps: list[float]
    labels: np.ndarray
    """1.0 for a hallucinated answer."""


def read_answers(model: LocalFactuality, records: list[dict[str, Any]]) -> Answers:
    cases = [
        EvalCase(input=r["input"], contexts=r["contexts"], output=r["output"]) for r in records
    ]
    answers = Answers([], [], [], [r["input"] for r in records], [], np.array([]))
    for start in range(0, len(cases), 64):
        for record, evidence in zip(
            records[start : start + 64],
            model.sentence_evidence(cases[start : start + 64]),
            strict=True,
        ):
            answers.rows.append(evidence.rows)
            answers.sentence_labels.append(record.get("sentence_labels", []))
            answers.judged.append([item.judged for item in evidence.supports])
            answers.topic_overlaps.append(evidence.topic_overlap)
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


def context_swaps(data: Path, per_task: int, seed: int) -> list[dict[str, Any]]:
    """Faithful HaluEval train answers in their own contexts and in another item's."""
    swaps = []
    for task in lfc.TASKS:
        rng = random.Random(f"{seed}-{task}")
        items = lfc.load_items(data, task, "train")
        rng.shuffle(items)
        for record in lfc.context_swap(items[:per_task], rng):
            label = "hallucinated" if record["hallucinated"] else "factual"
            swaps.append({**record, "label": label})
    return swaps


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
    """`CASE_FEATURES` per answer: its worst sentence's combined logit and the case terms."""
    design = []
    for rows, judged, question, overlap in zip(
        answers.rows, answers.judged, answers.questions, answers.topic_overlaps, strict=True
    ):
        raws = [
            bias + float(np.dot(weights, row))
            for row, keep in zip(rows, judged, strict=True)
            if keep
        ]
        design.append((max(raws, default=NOT_READ), *case_terms(len(raws), question, overlap)))
    return np.array(design)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


OFF_TOPIC = CASE_FEATURES.index("off_topic")
HELD = [i for i in range(len(CASE_FEATURES)) if i != OFF_TOPIC]
"""The calibration inputs fitted on the tuning and HaluEval answers (step 3)."""


def fit_off_topic(swaps: Answers, weights: np.ndarray, bias: float, beta: np.ndarray) -> None:
    """Step 4: ``beta``'s ``off_topic`` weight on the context swaps, its other terms held."""
    design = case_design(swaps, weights, bias)
    offset = design[:, HELD] @ beta[HELD] + beta[-1]
    fitted = logistic(design[:, [OFF_TOPIC]], swaps.labels, 1e-3, offset=offset, intercept=False)
    beta[OFF_TOPIC] = fitted[0]


def report(name: str, scores: np.ndarray, labels: np.ndarray, threshold: float) -> None:
    predicted = (scores >= threshold).astype(float)
    print(
        f"{name}: {len(labels)} answers, balanced accuracy "
        f"{balanced_accuracy(labels, predicted):.3f} at threshold {threshold:.3f}; caught "
        f"{predicted[labels == 1].mean():.3f}, kept {1 - predicted[labels == 0].mean():.3f}"
    )


def calibrated(design: np.ndarray, beta: np.ndarray) -> np.ndarray:
    scores: np.ndarray = 1 / (1 + np.exp(-(design @ beta[:-1] + beta[-1])))
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tune", type=Path, help="the tuning answers (steps 1-3 and 5)")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True, help="the shared data (HaluEval train)")
    parser.add_argument("--halueval", type=int, default=400, help="HaluEval answers per task")
    parser.add_argument(
        "--swaps", type=int, default=200, help="HaluEval items per task read in swapped contexts"
    )
    parser.add_argument(
        "--off-topic-only",
        action="store_true",
        help="step 4 alone: keep the model's combiner, other calibration terms and threshold",
    )
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--l2", type=float, default=1.0)
    args = parser.parse_args()
    if args.tune is None and not args.off_topic_only:
        parser.error("--tune is required unless --off-topic-only")
    model = LocalFactuality(model_path=args.model)
    swaps = read_answers(model, context_swaps(args.data, args.swaps, args.seed))
    swaps_used = f"{len(swaps.labels)} HaluEval train answers in their own and swapped contexts"
    path = args.model / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    if args.off_topic_only:
        weights, bias = np.array(config["weights"]), float(config["bias"])
        beta = np.array(config["calibration"])
        fit_off_topic(swaps, weights, bias, beta)
        print(f"off_topic {beta[OFF_TOPIC]:+.3f}")
        swap_scores = calibrated(case_design(swaps, weights, bias), beta)
        report("HaluEval train context swaps", swap_scores, swaps.labels, config["threshold"])
        config.update(
            calibration=[round(float(v), 6) for v in beta], off_topic_fitted_on=swaps_used
        )
        path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        return
    tune = read_answers(model, read_jsonl(args.tune))
    shapes = read_answers(model, halueval_sample(args.data, args.halueval, args.seed))
    weights, bias = sentence_combiner(tune, args.l2)
    design = np.vstack([case_design(tune, weights, bias), case_design(shapes, weights, bias)])
    case_labels = np.concatenate([tune.labels, shapes.labels])
    beta = np.zeros(len(CASE_FEATURES) + 1)
    beta[[*HELD, -1]] = logistic(design[:, HELD], case_labels, 1e-3)
    fit_off_topic(swaps, weights, bias, beta)
    scores = calibrated(design, beta)
    _, threshold = best_threshold(scores, case_labels)
    ece, table = reliability(scores, case_labels)
    print("| feature | weight |\n|---|---|")
    for name, weight in zip(FEATURES, weights, strict=True):
        print(f"| {name} | {weight:+.3f} |")
    print(f"bias {bias:+.3f}")
    print("| calibration input | weight |\n|---|---|")
    for name, weight in zip((*CASE_FEATURES, "intercept"), beta, strict=True):
        print(f"| {name} | {weight:+.3f} |")
    report(args.tune.name, scores[: len(tune.labels)], tune.labels, threshold)
    report("HaluEval train sample", scores[len(tune.labels) :], shapes.labels, threshold)
    report("both", scores, case_labels, threshold)
    swap_scores = calibrated(case_design(swaps, weights, bias), beta)
    report("HaluEval train context swaps", swap_scores, swaps.labels, threshold)
    print(f"expected calibration error {ece:.4f}")
    print("| bin | n | mean score | hallucinated |\n|---|---|---|---|")
    print("\n".join(table))
    low, high, kept, right = cascade_band(scores, case_labels)
    print(
        f"Cascade band ({low:.2f}, {high:.2f}): the local verdict stands on {kept:.0%} of the "
        f"tuning answers, {right:.1%} of them right; the rest go to the judge"
    )
    config.update(
        weights=[round(float(w), 6) for w in weights],
        bias=round(bias, 6),
        calibration=[round(float(v), 6) for v in beta],
        threshold=round(threshold, 4),
        features=list(FEATURES),
        tuned_on=f"{args.tune.name}: {len(tune.labels)} production-style answers "
        f"(scripts/factuality_synth.py); calibration also on {len(shapes.labels)} HaluEval "
        "train answers, for its shape terms",
        off_topic_fitted_on=swaps_used,
    )
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    if not all(math.isfinite(v) for v in config["weights"] + config["calibration"]):
        raise SystemExit("the fit diverged")


if __name__ == "__main__":
    main()
