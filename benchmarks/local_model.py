"""Throughput of LocalFactuality on typical RAG cases, on this machine.

    python benchmarks/local_model.py [--cases 256] [--rounds 3] [--file CASES.jsonl]

A typical case: a question, three ~120-word passages and a ~100-word answer. Prints the
model load time, cases per second through concurrent `evaluate()` calls (micro-batched)
and through one-by-one calls, and the process's peak resident memory. ``--file`` (JSONL
with ``input``, ``contexts`` and ``output``, e.g. the shared ``realistic_dev.jsonl``) also
prints the median case's time, one case per call, as the speed floor is stated.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import statistics
import time
from pathlib import Path

from tracefact.evaluators.base import EvalCase
from tracefact.evaluators.local import LocalFactuality, model_dir

PEOPLE = ["Ada Brennan", "Tomas Okafor", "Lena Vogel", "Ravi Menon", "Sara Lind", "Jun Park"]
PLACES = ["Lisbon", "Nairobi", "Osaka", "Quebec", "Tallinn", "Cordoba", "Perth", "Bergen"]
THINGS = [
    "the harbour bridge",
    "a solar farm",
    "the city library",
    "a rail tunnel",
    "the water plant",
    "a research lab",
    "the stadium",
    "a ferry terminal",
]
VERBS = ["opened", "funded", "designed", "expanded", "inspected", "renovated", "announced"]


def sentence(rng: random.Random) -> str:
    return (
        f"In {rng.randint(1950, 2024)}, {rng.choice(PEOPLE)} {rng.choice(VERBS)} "
        f"{rng.choice(THINGS)} in {rng.choice(PLACES)} at a cost of "
        f"{rng.randint(2, 900)} million dollars, according to officials of the regional council."
    )


def text(rng: random.Random, words: int) -> str:
    parts: list[str] = []
    while sum(len(p.split()) for p in parts) < words:
        parts.append(sentence(rng))
    return " ".join(parts)


def typical_case(rng: random.Random) -> EvalCase:
    passages = [text(rng, 120) for _ in range(3)]
    facts = " ".join(passages).split(". ")
    answer = ". ".join(rng.sample(facts, 4)).rstrip(".") + "."
    return EvalCase(
        input=f"What did {rng.choice(PEOPLE)} do in {rng.choice(PLACES)}?",
        contexts=passages,
        output=answer,
    )


def median_case(evaluator: LocalFactuality, path: Path, rounds: int) -> None:
    """Each round times every case of ``path`` alone; the best round's median is printed."""
    with open(path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    cases = [EvalCase(input=r["input"], contexts=r["contexts"], output=r["output"]) for r in rows]
    medians: list[float] = []
    for _ in range(rounds):
        times = []
        for case in cases:
            started = time.perf_counter()
            evaluator.evaluate_batch([case])
            times.append(time.perf_counter() - started)
        medians.append(statistics.median(times))
    best = min(medians)
    print(
        f"{path.name}: median case {1000 * best:.1f} ms ({1 / best:.1f} cases/s), best of "
        f"{rounds} rounds ({', '.join(f'{1000 * m:.1f}' for m in medians)} ms), {len(cases)} cases"
    )


async def run(count: int, rounds: int, path: Path | None) -> None:
    rng = random.Random(0)
    cases = [typical_case(rng) for _ in range(count)]
    words = sum(len(c.output.split()) + sum(len(p.split()) for p in c.contexts) for c in cases)
    print(
        f"{count} cases, {words / count:.0f} words each (answer ~"
        f"{sum(len(c.output.split()) for c in cases) / count:.0f})"
    )
    size = (model_dir() / "model.onnx").stat().st_size / 1e6
    evaluator = LocalFactuality()
    print(f"model.onnx {size:.1f} MB; load {evaluator.load():.2f} s")
    await evaluator.evaluate(cases[0])  # warm-up

    rates: list[float] = []
    for _ in range(rounds):  # best round: this machine's neighbours come and go
        started = time.perf_counter()
        before = dict(evaluator.stats)
        await asyncio.gather(*(evaluator.evaluate(c) for c in cases))
        rates.append(count / (time.perf_counter() - started))
    batches = evaluator.stats["batches"] - before["batches"]
    sequences = evaluator.stats["sequences"] - before["sequences"]
    print(
        f"batched:    {max(rates):6.1f} cases/s, best of {rounds} rounds "
        f"({', '.join(f'{r:.1f}' for r in rates)}); {batches} batches, "
        f"{sequences / count:.1f} model sequences per case"
    )

    sample = cases[: max(16, count // 4)]
    started = time.perf_counter()
    for c in sample:
        await evaluator.evaluate(c)
    alone = time.perf_counter() - started
    print(
        f"one-by-one: {len(sample) / alone:6.1f} cases/s "
        f"({1000 * alone / len(sample):.0f} ms per case)"
    )
    if path is not None:
        median_case(evaluator, path, rounds)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--file", type=Path, default=None, help="JSONL cases: median case time")
    args = parser.parse_args()
    asyncio.run(run(args.cases, args.rounds, args.file))


if __name__ == "__main__":
    main()
