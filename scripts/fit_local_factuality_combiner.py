"""Fit LocalFactuality's combiner and threshold; the last step after training the model.

    python scripts/fit_local_factuality_combiner.py --data ../shared/data \
        --model src/tracefact/models/local_factuality

The model (``scripts/train_local_factuality.py``) gives one logit per answer sentence.
Alone it leans on the answer's style, which HaluEval rewards, and misses literal
mismatches. The combiner is a logistic regression over that logit and the alignment
features of ``tracefact.evaluators.local.alignment``, max-pooled over sentences (an answer is
as unsupported as its worst sentence). It is fitted on HaluEval train items the model
never saw (the tail of the training script's shuffle), each used several ways: the
faithful and the hallucinated answer; the faithful answer against another item's context;
the faithful answer with one name or number swapped for another from the same context;
sentences copied from the context (for QA the one holding the answer) and their swapped
form. The threshold is chosen on scores as the evaluator gives them, a sentence copied from
the contexts capped at ``copied_score`` (a setting kept from config.json); it
maximises the mean balanced accuracy over the dev files and contrast sets built from
dev with a seed unlike the reported ones. Writes ``weights``, ``bias`` and
``threshold`` into the model's config.json. Needs numpy and the runtime only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts"))

import local_factuality_contrast as lfc  # noqa: E402

from tracefact.evaluators.base import EvalCase  # noqa: E402
from tracefact.evaluators.confusion import Confusion  # noqa: E402
from tracefact.evaluators.local import LocalFactuality  # noqa: E402
from tracefact.evaluators.local.alignment import FEATURES, copied_shares  # noqa: E402
from tracefact.evaluators.local.windows import split_sentences  # noqa: E402

TRAIN_SEED = 7  # the training script's shuffle, so its tail is items the model never saw
TUNE_ITEMS = 150  # the training script's held-out head
Example = tuple[str, EvalCase, int]


def training_items(data: Path, counts: dict[str, int]) -> dict[str, list[dict[str, Any]]]:
    """Per task, the last ``counts[task]`` items of the training script's shuffle."""
    rng = random.Random(TRAIN_SEED)
    tails: dict[str, list[dict[str, Any]]] = {}
    for task in lfc.TASKS:  # same order of shuffles as the training script
        task_items = lfc.load_items(data, task, "train")
        rng.shuffle(task_items)
        tails[task] = task_items[TUNE_ITEMS:][-counts[task] :]
    return tails


def case(item: dict[str, Any], output: str, contexts: list[str] | None = None) -> EvalCase:
    contexts = item["contexts"] if contexts is None else contexts
    return EvalCase(input=item["input"], contexts=contexts, output=output)


def examples(items: list[dict[str, Any]], task: str, rng: random.Random) -> Iterator[Example]:
    """Each item as a HaluEval pair, a context swap, a minimal edit, and a copied answer.

    The copied answer comes with its minimal edit too (label 1 = hallucinated).
    """
    for index, item in enumerate(items):
        context = " ".join(item["contexts"])
        other = items[(index + 1 + rng.randrange(len(items) - 1)) % len(items)]
        yield task, case(item, item["faithful"]), 0
        yield task, case(item, item["hallucinated"]), 1
        yield task, case(item, item["faithful"], other["contexts"]), 1
        edited = lfc.swap_entity(item["faithful"], context, rng)
        if edited is not None:
            yield task, case(item, edited[0]), 1
        copied = copied_answer(item, task, rng)
        if copied is not None:
            yield task, case(item, copied), 0
            edited = lfc.swap_entity(copied, context, rng)
            if edited is not None:
                yield task, case(item, edited[0]), 1


def copied_answer(item: dict[str, Any], task: str, rng: random.Random) -> str | None:
    """A faithful answer in the style HaluEval lacks: sentences taken from the context.

    For QA the sentence that holds the answer; otherwise one to three consecutive
    context sentences. Without these the combiner learns that a fluent full sentence is
    suspect, because HaluEval's faithful QA answers are short spans.
    """
    sentences = split_sentences(" ".join(item["contexts"]))
    if task == "qa":
        answer = item["faithful"].lower()
        holders = [s for s in sentences if len(answer) > 2 and answer in s.lower()]
        return rng.choice(holders) if holders else None
    if not sentences:
        return None
    start = rng.randrange(len(sentences))
    return " ".join(sentences[start : start + rng.randint(1, 3)])


def tuning_sets(data: Path, per_task: int, seed: int) -> dict[str, list[Example]]:
    """Dev records and contrast sets from dev (a seed unlike the reported sets')."""
    sets: dict[str, list[Example]] = {}
    for name, rows in lfc.build(data, per_task, seed).items():
        sets[name] = [
            (
                name,
                EvalCase(input=r["input"], contexts=r["contexts"], output=r["output"]),
                int(r["hallucinated"]),
            )
            for r in rows
        ]
    for task, stem in lfc.TASKS.items():
        rows = lfc.load(data / f"{stem}_dev.jsonl")
        random.Random(f"{seed}-dev-{task}").shuffle(rows)
        sets[f"dev_{task}"] = [
            (
                task,
                EvalCase(input=r["input"], contexts=r["contexts"], output=r["output"]),
                int(r["hallucinated"]),
            )
            for r in rows[: 2 * per_task]
        ]
    return sets


def model_fingerprint(directory: Path) -> str:
    """Hash of the model files and settings bar the combiner's: what the rows depend on."""
    settings = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    for fitted in ("features", "weights", "bias", "threshold", "copied_share", "copied_score"):
        settings.pop(fitted, None)
    digest = hashlib.sha256(json.dumps([FEATURES, settings], sort_keys=True).encode())
    for name in ("model.onnx", "tokenizer.json"):
        digest.update((directory / name).read_bytes())
    return digest.hexdigest()[:16]


def evidence_rows(
    detector: LocalFactuality, batch: list[Example], cache: Path
) -> list[list[list[float]]]:
    """Feature rows per case, cached on disk by case (the model is the slow part).

    The cache file is named by `model_fingerprint`, so stale rows are never reused.
    """
    stored: dict[str, list[list[float]]] = {}
    if cache.exists():
        with cache.open(encoding="utf-8") as handle:
            for line in handle:
                key, rows = json.loads(line)
                stored[key] = rows
    keys = [
        hashlib.sha256(example.model_dump_json().encode()).hexdigest() for _, example, _ in batch
    ]
    missing = [i for i, key in enumerate(keys) if key not in stored]
    with cache.open("a", encoding="utf-8") as handle:
        for start in range(0, len(missing), 32):
            chunk = missing[start : start + 32]
            for index, item in zip(
                chunk, detector.sentence_evidence([batch[i][1] for i in chunk]), strict=True
            ):
                stored[keys[index]] = item.rows
                handle.write(json.dumps([keys[index], item.rows]) + "\n")
            print(f"\r{cache.name}: {start + len(chunk)}/{len(missing)}", end="", flush=True)
    if missing:
        print()
    return [stored[key] for key in keys]


def fit(
    rows: list[list[list[float]]], labels: np.ndarray, weights: np.ndarray, l2: float
) -> tuple[np.ndarray, float]:
    """Max-pooled logistic regression by projected Adam, weights >= 0.

    Case logit = max over sentences of w.x + b.
    """
    features = np.array([r for case_rows in rows for r in case_rows], dtype=np.float64)
    owner = np.repeat(np.arange(len(rows)), [len(r) for r in rows])
    w = np.zeros(features.shape[1])
    w[0] = 1.0
    b = 0.0
    moments = [np.zeros(features.shape[1] + 1), np.zeros(features.shape[1] + 1)]
    for step in range(1, 3001):
        z = features @ w + b
        order = np.lexsort((z, owner))  # by case, then by logit: last of each case = max
        last = np.r_[np.nonzero(np.diff(owner[order]))[0], len(order) - 1]
        top = order[last]
        p = 1.0 / (1.0 + np.exp(-z[top]))
        residual = (p - labels) * weights / weights.sum()
        grad = np.r_[features[top].T @ residual + l2 * w, residual.sum()]
        moments[0] = 0.9 * moments[0] + 0.1 * grad
        moments[1] = 0.999 * moments[1] + 0.001 * grad**2
        update = (
            0.05 * (moments[0] / (1 - 0.9**step)) / (np.sqrt(moments[1] / (1 - 0.999**step)) + 1e-8)
        )
        # Monotone by construction: more missing evidence never lowers the score.
        w = np.maximum(w - update[:-1], 0.0)
        b -= update[-1]
    return w, float(b)


def scores(rows: list[list[list[float]]], w: np.ndarray, b: float) -> np.ndarray:
    return np.array([1.0 / (1.0 + np.exp(-(np.max(np.array(r) @ w) + b))) for r in rows])


def capped_scores(
    rows: list[list[list[float]]], w: np.ndarray, b: float, batch: list[Example], config: Any
) -> np.ndarray:
    """`scores` as `LocalFactuality` gives them, copied sentences capped.

    A sentence copied from the contexts (``copied_share`` of it or more) scores at most
    ``copied_score``.
    """
    share = config.get("copied_share", 1.0)
    cap = config.get("copied_score", 1.0)
    out = []
    for case_rows, (_, example, _) in zip(rows, batch, strict=True):
        logits = np.array(case_rows) @ w + b
        values = 1.0 / (1.0 + np.exp(-logits))
        copied = copied_shares(example.contexts, split_sentences(example.output))
        pairs = zip(values, copied, strict=True)
        out.append(max(min(v, cap) if c >= share else v for v, c in pairs))
    return np.array(out)


def balanced_accuracy(labels: np.ndarray, predicted: np.ndarray) -> float:
    return Confusion.of(zip(labels == 1, predicted, strict=True)).balanced_accuracy


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="HaluEval data directory")
    parser.add_argument("--model", type=Path, required=True, help="model directory to update")
    parser.add_argument("--work", type=Path, default=Path("/tmp/local_factuality_combiner"))
    parser.add_argument("--items", type=int, default=700, help="train items per task")
    parser.add_argument(
        "--summary-items", type=int, default=250, help="train items for summaries (slow)"
    )
    parser.add_argument("--tune-per-task", type=int, default=100)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--l2", type=float, default=1e-3)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    detector = LocalFactuality(model_path=args.model)
    fingerprint = model_fingerprint(args.model)

    train: list[Example] = []
    counts = {task: args.items for task in lfc.TASKS} | {"summarization": args.summary_items}
    for task, items in training_items(args.data, counts).items():
        train.extend(examples(items, task, random.Random(f"{args.seed}-{task}")))
    rows = evidence_rows(detector, train, args.work / f"train-{fingerprint}.jsonl")
    labels = np.array([label for _, _, label in train], dtype=np.float64)
    groups = [f"{task}-{label}" for task, _, label in train]
    counts = {group: groups.count(group) for group in set(groups)}
    weights = np.array([1.0 / counts[group] for group in groups])  # tasks and labels equal
    w, b = fit(rows, labels, weights, args.l2)
    print(
        "weights:", dict(zip(FEATURES, np.round(w, 3).tolist(), strict=True)), "bias", round(b, 3)
    )

    config_path = args.model / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    tuning = tuning_sets(args.data, args.tune_per_task, args.seed)
    tuned = {
        name: (
            capped_scores(
                evidence_rows(detector, examples_, args.work / f"{name}-{fingerprint}.jsonl"),
                w,
                b,
                examples_,
                config,
            ),
            np.array([label for _, _, label in examples_]),
        )
        for name, examples_ in tuning.items()
    }
    grid = np.round(np.arange(0.05, 0.96, 0.01), 2)
    mean_ba = [np.mean([balanced_accuracy(y, s >= t) for s, y in tuned.values()]) for t in grid]
    threshold = float(grid[int(np.argmax(mean_ba))])
    for name, (s, y) in tuned.items():
        print(f"{name:<28} balanced accuracy {balanced_accuracy(y, s >= threshold):.3f}")
    print(f"threshold {threshold} (mean balanced accuracy {max(mean_ba):.3f})")

    config.pop("calibration_a", None)
    config.pop("calibration_b", None)
    config.update(
        features=list(FEATURES),
        weights=[round(float(x), 6) for x in w],
        bias=round(b, 6),
        threshold=threshold,
    )
    config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {config_path}")


if __name__ == "__main__":
    main()
