"""`tracefact eval`'s engine: a JSONL file of cases through one evaluator, resumably.

Each `{input, contexts, output}` record of a .jsonl or .jsonl.gz file is judged by the
pipeline's own `run_evaluator` (its deadline and retries), `concurrency` at a time, and
its result line appended to `out` and flushed as it completes. The first line of `out`
records the evaluator; a re-run with the same evaluator skips ids already done (and
retries those that did not finish ok), another evaluator is refused unless `force`
starts the file over. Records with a gold `hallucinated` label are scored (precision,
recall, F1, balanced accuracy) overall and per task. `cli.py` only parses arguments.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import importlib
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from tracefact._imports import stop_litellm_worker
from tracefact.errors import TracefactError
from tracefact.evaluators.base import EvalCase, EvaluationError, Evaluator
from tracefact.evaluators.confusion import Confusion, by_group
from tracefact.evaluators.registry import DEFAULT_SPEC, from_spec
from tracefact.pipeline.retry import RetryPolicy, run_evaluator


def make_evaluator(spec: str, api_base: str | None = None) -> Evaluator:
    """An evaluator from its command-line spec; imports only what that evaluator needs."""
    evaluator = from_spec(spec, api_base)
    check_credentials = getattr(evaluator, "check_credentials", None)
    if callable(check_credentials):  # the judges: a missing key is one line, not one per case
        check_credentials()
    return evaluator


class UsageError(TracefactError):
    """A problem with the command's input, reported in one line with exit code 2."""


@dataclass(frozen=True)
class EvalFileOptions:
    """What `tracefact eval` was asked: its arguments, checked by the parser."""

    file: Path
    out: Path
    evaluator: str = DEFAULT_SPEC
    concurrency: int = 8
    limit: int | None = None
    timeout: float = 60.0
    retries: int = 2
    api_base: str | None = None
    retry_errors: bool = True
    force: bool = False


def run(options: EvalFileOptions) -> int:
    """Evaluate the file, append result lines, print the report; the exit code."""
    try:
        evaluator = make_evaluator(options.evaluator, options.api_base)
        records = list(_read_records(options.file, options.limit))
        identity = _identity(evaluator)
        previous = _start_results(options.out, identity, options.force)
    except (UsageError, ValueError, OSError, ImportError, EvaluationError) as exc:
        print(f"tracefact eval: {exc}", file=sys.stderr)
        return 2
    latest = {row["id"]: row for row in previous}  # last line per id wins
    done = {
        id_ for id_, row in latest.items() if not options.retry_errors or row.get("status") == "ok"
    }
    todo = [record for record in records if record["id"] not in done]
    if latest:
        retried = sum(record["id"] in latest for record in todo)
        again = f"; retrying {retried} that did not finish ok" if retried else ""
        done_count = len(records) - len(todo)
        print(f"resuming: {done_count} of {len(records)} already in {options.out}{again}")
    started = time.perf_counter()
    rows = asyncio.run(_evaluate_all(evaluator, todo, options))
    elapsed = time.perf_counter() - started
    wanted = {record["id"] for record in records}
    results = [r for r in _read_results(options.out) if r["id"] in wanted]
    _print_report(rows, results, elapsed, resumed=bool(latest))
    return 1 if any(row["status"] != "ok" for row in rows) else 0


HEADER_KEY = "tracefact_eval"
"""The key of --out's first line, which records the evaluator that wrote the file."""


def _identity(evaluator: Evaluator) -> Any:
    """The evaluator's `describe()` as plain JSON, comparable with what a file recorded."""
    return json.loads(evaluator.describe().identity())


def _start_results(path: Path, identity: Any, force: bool) -> list[dict[str, Any]]:
    """Result rows already in `path` by this evaluator; writes the header to a new file.

    A file written by another evaluator (or by a version that recorded none) is refused,
    since its rows would be taken for this evaluator's; ``force`` starts it over.
    """
    recorded = _read_header(path)
    rows = _read_results(path)
    if (recorded is not None or rows) and recorded != identity:
        if not force:
            who = "an unrecorded evaluator" if recorded is None else "another evaluator"
            named = f" ({_label(recorded)})" if isinstance(recorded, dict) else ""
            raise UsageError(
                f"{path} was written by {who}{named}; pass --force to start it over, "
                "or choose another --out"
            )
        recorded, rows = None, []
        path.unlink()
    if recorded is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as out:
            out.write(json.dumps({HEADER_KEY: {"evaluator": identity}}, ensure_ascii=False) + "\n")
    return rows


def _label(identity: dict[str, Any]) -> str:
    """``lexical-overlap`` or ``llm-judge openai/gpt-4o-mini``: which evaluator, briefly."""
    return " ".join(str(identity[key]) for key in ("evaluator", "model") if identity.get(key))


def _read_header(path: Path) -> Any:
    """The evaluator recorded on the first line of `path`, or None."""
    if not path.exists():
        return None
    with path.open(encoding="utf-8") as lines:
        first = lines.readline()
    try:
        header = json.loads(first)
    except (ValueError, RecursionError):
        return None
    if isinstance(header, dict) and isinstance(header.get(HEADER_KEY), dict):
        return header[HEADER_KEY].get("evaluator")
    return None


def _read_records(path: Path, limit: int | None) -> Iterator[dict[str, Any]]:
    """Records of the shared data format, or plain {input, contexts, output} objects."""
    opener = gzip.open if path.name.endswith(".gz") else open
    count = 0
    with opener(path, "rt", encoding="utf-8") as lines:
        numbered = enumerate(lines, start=1)
        while True:
            try:
                number, line = next(numbered)
            except StopIteration:
                return
            except (EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
                raise UsageError(f"{path}: unreadable (truncated or corrupt?): {exc}") from exc
            if not line.strip():
                continue
            if limit is not None and count >= limit:
                return
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError("expected a JSON object")
                case = EvalCase.model_validate(
                    {k: record[k] for k in ("input", "contexts", "output") if k in record}
                )
            except RecursionError:
                raise UsageError(f"{path}:{number}: not a valid case: nested too deeply") from None
            except ValueError as exc:  # JSON and pydantic validation errors alike
                raise UsageError(f"{path}:{number}: not a valid case: {_one_line(exc)}") from exc
            gold = record.get("hallucinated")
            yield {
                "id": str(record.get("id") or _case_id(case)),
                "task": str(record.get("task") or ""),
                "case": case,
                "hallucinated": gold if isinstance(gold, bool) else None,
            }
            count += 1


def _one_line(exc: ValueError) -> str:
    """A validation error's first problem as `field: message`; any other error's text."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    return str(exc)


def _case_id(case: EvalCase) -> str:
    material = json.dumps([case.input, case.contexts, case.output], ensure_ascii=False)
    return "sha256-" + hashlib.sha256(material.encode()).hexdigest()[:16]


def _read_results(path: Path) -> list[dict[str, Any]]:
    """Result lines already written; a torn line (an interrupted run) is ignored.

    A line that parses but is not a result of ours (an id that is not a string) means
    the file is not a tracefact results file: a `UsageError`, never a guess.
    """
    if not path.exists():
        return []
    rows = []
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if not isinstance(row, dict) or HEADER_KEY in row:
                continue
            if not isinstance(row.get("id"), str):
                raise UsageError(
                    f"{path}:{number}: not a tracefact result line (its id is not a string); "
                    "choose another --out"
                )
            rows.append(row)
    return rows


async def _evaluate_all(
    evaluator: Evaluator, records: list[dict[str, Any]], options: EvalFileOptions
) -> list[dict[str, Any]]:
    """N workers pull records; each result line is written and flushed as it completes."""
    policy = RetryPolicy(timeout_seconds=options.timeout, max_retries=options.retries)
    pending = iter(records)
    rows: list[dict[str, Any]] = []
    progress = _progress(len(records))

    async def worker(out: IO[str]) -> None:
        for record in pending:  # a shared iterator: each record goes to one worker
            outcome = await run_evaluator(evaluator, record["case"], policy)
            result = outcome.result
            row = {
                "id": record["id"],
                "task": record["task"],
                "label": result.label if result else None,
                "score": result.score if result else None,
                "status": outcome.status,
                "error": outcome.error,
                "explanation": result.explanation if result else None,
                "evaluator": result.evaluator if result else None,
                "latency_ms": round(outcome.latency_ms, 1),
                "cost_usd": outcome.cost_usd,
                "hallucinated": record["hallucinated"],
            }
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            out.flush()
            rows.append(row)
            progress()

    options.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        # A lone surrogate in a result's text is written as "?": one line stays whole.
        with options.out.open("a", encoding="utf-8", errors="replace") as out:
            if _ends_torn(options.out):
                out.write("\n")  # so the first new line is not glued to a torn one
            await asyncio.gather(*(worker(out) for _ in range(options.concurrency)))
    finally:
        progress(close=True)
        close = getattr(evaluator, "aclose", None)
        if close is not None:
            await close()
        await stop_litellm_worker()
    return rows


def _ends_torn(path: Path) -> bool:
    with path.open("rb") as existing:
        if existing.seek(0, 2) == 0:
            return False
        existing.seek(-1, 2)
        return existing.read(1) != b"\n"


def _progress(total: int) -> Callable[..., None]:
    """Tqdm when it is installed, else a counter on stderr."""
    try:
        tqdm = importlib.import_module("tqdm").tqdm
    except ImportError:
        pass
    else:
        bar = tqdm(total=total, unit="case", file=sys.stderr, dynamic_ncols=True)

        def advance_bar(close: bool = False) -> None:
            if close:
                bar.close()
            else:
                bar.update()

        return advance_bar
    count = 0

    def advance_counter(close: bool = False) -> None:
        nonlocal count
        if close:
            print(file=sys.stderr)
            return
        count += 1
        print(f"\r{count}/{total} cases", end="", file=sys.stderr, flush=True)

    return advance_counter


MAX_ERROR_KINDS = 3
"""Distinct error messages the report quotes; the rest are counted."""


def _print_report(
    run: list[dict[str, Any]], rows: list[dict[str, Any]], elapsed: float, resumed: bool = False
) -> None:
    """This run's throughput, cost and errors, with why; agreement over every result line.

    A resumed run also prices every result the file holds.
    """
    errors = Counter(str(row.get("error") or row["status"]) for row in run if row["status"] != "ok")
    rate = len(run) / elapsed if elapsed > 0 else 0.0
    count = sum(errors.values())
    print(f"evaluated {len(run)} cases in {elapsed:.1f}s ({rate:.2f} cases/s), {count} errors")
    for message, times in errors.most_common(MAX_ERROR_KINDS):
        print(f"  {times} × {_shorten(message)}")
    if len(errors) > MAX_ERROR_KINDS:
        print(f"  ... {len(errors) - MAX_ERROR_KINDS} other errors; see the error field in --out")
    latest = {row["id"]: row for row in rows}  # last line per id wins
    if resumed:
        print(f"cost: {_cost(run)} this run, {_cost(list(latest.values()))} for every result")
    else:
        print(f"cost: {_cost(run)}")
    labelled = [
        (row.get("task") or "-", row["hallucinated"], row.get("label") == "hallucinated")
        for row in latest.values()
        if row.get("status") == "ok" and isinstance(row.get("hallucinated"), bool)
    ]
    if not labelled:
        return
    groups = by_group(labelled)
    overall = sum(groups.values(), Confusion())
    print(f"{'task':<16}{'n':>7}{'precision':>11}{'recall':>9}{'f1':>8}{'bal_acc':>9}")
    for task, confusion in [("all", overall), *groups.items()]:
        print(
            f"{task:<16}{confusion.total:>7}{confusion.precision:>11.3f}{confusion.recall:>9.3f}"
            f"{confusion.f1:>8.3f}{confusion.balanced_accuracy:>9.3f}"
        )


def _cost(rows: list[dict[str, Any]]) -> str:
    """What judging `rows` cost: $0 for none, unknown when nothing was priced."""
    costs = [row["cost_usd"] for row in rows if row.get("cost_usd") is not None]
    if not rows:
        return "$0.000000"
    if not costs:
        return "unknown"
    text = f"${sum(costs):.6f}"
    if len(costs) < len(rows):
        text += f" (priced for {len(costs)} of {len(rows)} cases)"
    return text


def _shorten(message: str, limit: int = 160) -> str:
    flat = " ".join(message.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
