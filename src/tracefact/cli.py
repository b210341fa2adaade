"""The `tracefact` command.

``tracefact eval`` runs an evaluator over a JSONL file of cases; ``tracefact collector``
runs the OTLP collector; ``tracefact report`` draws a spans file as one HTML page;
``tracefact monitor`` shows the live rate in the terminal.

Each subcommand is a function taking the parsed arguments and returning an exit code,
registered in `build_parser`; adding one does not touch the others.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import importlib
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from tracefact._imports import stop_litellm_worker
from tracefact.errors import ConfigurationError, MissingExtraError
from tracefact.evaluators.base import EvalCase, EvaluationError, Evaluator
from tracefact.evaluators.confusion import Confusion, by_group
from tracefact.evaluators.registry import DEFAULT_SPEC, SPECS, from_spec


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    return handler(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tracefact", description="Hallucination evaluation on your own LLM traces."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_eval(commands)
    _add_collector(commands)
    _add_worker(commands)
    _add_report(commands)
    _add_monitor(commands)
    return parser


# --- tracefact collector -----------------------------------------------------------------


def _add_collector(commands: Any) -> None:
    command = commands.add_parser(
        "collector",
        help="run the OTLP collector that evaluates LLM spans in flight",
        description="Receive OTLP traces (HTTP and gRPC), evaluate sampled LLM spans with the "
        "same pipeline as the SDK, and forward every span to the configured upstreams. Runs "
        "until SIGTERM or SIGINT, then drains. Needs the `collector` extra.",
    )
    command.add_argument(
        "--config",
        type=Path,
        required=True,
        help="its YAML configuration file",
    )
    command.set_defaults(handler=_collector_command)


def _add_worker(commands: Any) -> None:
    command = commands.add_parser(
        "worker",
        help="evaluate and forward what collectors stored in a durable queue",
        description="Take the requests that `tracefact collector` processes stored in the "
        "configured durable queue (queue: redis, or sqlite on the same machine), evaluate "
        "their sampled LLM spans, forward every span upstream and acknowledge them. The same "
        "configuration file as the collectors; receivers are not started. Runs until SIGTERM "
        "or SIGINT, then drains. Needs the `collector` extra (and `redis` for Redis).",
    )
    command.add_argument("--config", type=Path, required=True, help="its YAML configuration file")
    command.set_defaults(handler=_worker_command)


def _collector_command(args: argparse.Namespace) -> int:
    return _run_service(args, worker=False)


def _worker_command(args: argparse.Namespace) -> int:
    return _run_service(args, worker=True)


def _run_service(args: argparse.Namespace, *, worker: bool) -> int:
    try:
        # Imported here: the collector's dependencies are an extra, `tracefact eval` needs none.
        from tracefact.collector import config as collector_config
        from tracefact.collector import service

        config = collector_config.load(args.config)
        return service.run(config, worker=worker)
    except (ConfigurationError, MissingExtraError) as exc:
        print(f"tracefact {'worker' if worker else 'collector'}: {exc}", file=sys.stderr)
        return 2


# --- tracefact eval ----------------------------------------------------------------------


def _add_eval(commands: Any) -> None:
    command = commands.add_parser(
        "eval",
        help="evaluate a JSONL file of cases",
        description="Evaluate each {input, contexts, output} record of a .jsonl or .jsonl.gz "
        "file, append one result line per record to --out, and, when records carry a gold "
        "`hallucinated` label, print precision, recall, F1 and balanced accuracy overall and "
        "per task. The first line of --out records the evaluator; re-running with the same "
        "evaluator skips ids already done (and retries those that errored), another "
        "evaluator is refused unless --force starts the file over.",
    )
    command.add_argument("file", type=Path, help="cases, one JSON object per line")
    command.add_argument(
        "--evaluator", default=DEFAULT_SPEC, help=f"{SPECS} (default: %(default)s)"
    )
    command.add_argument("--out", type=Path, required=True, help="results JSONL (appended)")
    command.add_argument(
        "--concurrency", type=_positive_int, default=8, help="cases at once (default: 8)"
    )
    command.add_argument("--limit", type=_positive_int, help="only the first N records")
    command.add_argument(
        "--timeout", type=_positive_float, default=60.0, help="seconds per case (default: 60)"
    )
    command.add_argument(
        "--retries",
        type=_non_negative_int,
        default=2,
        help="retries of transient errors (default: 2)",
    )
    command.add_argument("--api-base", help="for judges: an OpenAI-compatible or proxy base URL")
    command.add_argument(
        "--retry-errors",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="on a re-run, evaluate again the ids whose last result was not ok (default: on)",
    )
    command.add_argument(
        "--force",
        action="store_true",
        help="start --out over when it was written by another evaluator (its lines are lost)",
    )
    command.set_defaults(handler=_eval_command)


# --- tracefact report --------------------------------------------------------------------


def _add_report(commands: Any) -> None:
    command = commands.add_parser(
        "report",
        help="draw a spans file as one self-contained HTML page",
        description="Read a spans file (OTLP/JSON, one export request per line, as "
        'configure(exporter="file:PATH") writes it) and write one HTML page that needs no '
        "network: the weighted hallucination rate over time with its 95% band by group, the "
        "score distribution, the worst cases with their explanations, evaluator cost and "
        "latency, and coverage (spans by status). Lines that are not export requests are "
        "counted and listed, not fatal.",
    )
    command.add_argument("file", type=Path, help="the spans file")
    command.add_argument("--html", type=Path, required=True, help="the page to write")
    command.add_argument(
        "--group-by",
        action="append",
        metavar="NAME",
        help="model, service, route, prompt_version or an attribute name; repeatable "
        "(default: model)",
    )
    command.add_argument(
        "--window",
        type=_positive_float,
        help="seconds of the sliding window of the rate over time (default: a fifth of the run)",
    )
    command.add_argument(
        "--worst", type=_non_negative_int, default=10, help="worst cases shown (default: 10)"
    )
    command.set_defaults(handler=_report_command)


def _report_command(args: argparse.Namespace) -> int:
    from tracefact.monitor.html import render
    from tracefact.monitor.report import build_report

    group_by = args.group_by or ["model"]
    try:
        report = build_report(args.file, group_by, args.window, args.worst)
    except (OSError, ValueError, TypeError) as exc:
        print(f"tracefact report: {_reason(exc)}", file=sys.stderr)
        return 2
    for bad in report.bad_lines[:5]:
        print(f"tracefact report: {args.file}:{bad.number}: {bad.reason}", file=sys.stderr)
    if report.bad_count:
        print(
            f"tracefact report: {report.bad_count} of {report.lines} lines were not OTLP/JSON "
            "export requests and were left out",
            file=sys.stderr,
        )
    if not report.spans:
        print(f"tracefact report: no spans in {args.file}; nothing written", file=sys.stderr)
        return 2
    try:
        args.html.write_text(render(report), encoding="utf-8")
    except OSError as exc:
        print(f"tracefact report: {_reason(exc)}", file=sys.stderr)
        return 2
    llm = sum(report.statuses.values())
    judged = report.statuses.get("ok", 0)
    print(f"report: {args.html.resolve()} ({report.spans} spans, {llm} LLM spans, {judged} judged)")
    return 0


def _reason(exc: Exception) -> str:
    """An OSError as 'no such file: PATH' rather than its errno tuple."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.strerror or exc}: {exc.filename}"
    return str(exc)


# --- tracefact monitor -------------------------------------------------------------------


def _add_monitor(commands: Any) -> None:
    command = commands.add_parser(
        "monitor",
        help="watch the live hallucination rate in the terminal",
        description="A live view of the weighted hallucination rate and its 95% interval per "
        "evaluator and group, throughput, queue depth and drops, from a Prometheus endpoint "
        "(an SDK with prometheus_port, or the collector) or from a spans file as it grows. "
        "q or Ctrl-C quits. Needs the monitor extra.",
    )
    source = command.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--prometheus", metavar="URL", help="a /metrics endpoint, e.g. http://127.0.0.1:9464"
    )
    source.add_argument("--spans", type=Path, metavar="FILE", help="a spans file to follow")
    command.add_argument(
        "--interval", type=_positive_float, default=2.0, help="seconds between refreshes (2)"
    )
    command.add_argument(
        "--group-by",
        action="append",
        metavar="NAME",
        help="with --spans: model, service, route, prompt_version or an attribute name; "
        "repeatable (default: model)",
    )
    command.add_argument(
        "--window",
        type=_positive_float,
        default=300.0,
        help="with --spans: seconds of the sliding window (default: 300)",
    )
    command.add_argument("--once", action="store_true", help="print one view and exit")
    command.set_defaults(handler=_monitor_command)


def _monitor_command(args: argparse.Namespace) -> int:
    from tracefact.monitor import sources, terminal

    source: sources.Source
    if args.prometheus:
        source = sources.PrometheusSource(_metrics_url(args.prometheus))
    else:
        group_by = tuple(args.group_by or ["model"])
        try:
            source = sources.SpansFileSource(args.spans, group_by, args.window)
        except (ValueError, TypeError) as exc:
            print(f"tracefact monitor: {exc}", file=sys.stderr)
            return 2
    try:
        if args.once:
            return terminal.print_once(source, args.interval)
        return terminal.run(source, args.interval)
    except ImportError as exc:
        print(f"tracefact monitor: {exc}", file=sys.stderr)
        return 2


def _metrics_url(url: str) -> str:
    """``http://host:9464`` means its ``/metrics``."""
    if urlsplit(url).path.rstrip("/") == "":
        return url.rstrip("/") + "/metrics"
    return url


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def make_evaluator(spec: str, api_base: str | None = None) -> Evaluator:
    """An evaluator from its command-line spec; imports only what that evaluator needs."""
    evaluator = from_spec(spec, api_base)
    check_credentials = getattr(evaluator, "check_credentials", None)
    if callable(check_credentials):  # the judges: a missing key is one line, not one per case
        check_credentials()
    return evaluator


class UsageError(Exception):
    """A problem with the command's input, reported in one line with exit code 2."""


def _eval_command(args: argparse.Namespace) -> int:
    try:
        evaluator = make_evaluator(args.evaluator, args.api_base)
        records = list(_read_records(args.file, args.limit))
        identity = _identity(evaluator)
        previous = _start_results(args.out, identity, args.force)
    except (UsageError, ValueError, OSError, ImportError, EvaluationError) as exc:
        print(f"tracefact eval: {exc}", file=sys.stderr)
        return 2
    latest = {row["id"]: row for row in previous}  # last line per id wins
    done = {
        id_ for id_, row in latest.items() if not args.retry_errors or row.get("status") == "ok"
    }
    todo = [record for record in records if record["id"] not in done]
    if latest:
        retried = sum(record["id"] in latest for record in todo)
        again = f"; retrying {retried} that did not finish ok" if retried else ""
        print(
            f"resuming: {len(records) - len(todo)} of {len(records)} already in {args.out}{again}"
        )
    started = time.perf_counter()
    rows = asyncio.run(_evaluate_all(evaluator, todo, args))
    elapsed = time.perf_counter() - started
    wanted = {record["id"] for record in records}
    _print_report(rows, [r for r in _read_results(args.out) if r["id"] in wanted], elapsed)
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
                raise UsageError(f"{path}:{number}: not a valid case: {exc}") from exc
            gold = record.get("hallucinated")
            yield {
                "id": str(record.get("id") or _case_id(case)),
                "task": str(record.get("task") or ""),
                "case": case,
                "hallucinated": gold if isinstance(gold, bool) else None,
            }
            count += 1


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
    evaluator: Evaluator, records: list[dict[str, Any]], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """N workers pull records; each result line is written and flushed as it completes."""
    from tracefact.pipeline.retry import RetryPolicy, run_evaluator

    policy = RetryPolicy(timeout_seconds=args.timeout, max_retries=args.retries)
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

    args.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with args.out.open("a", encoding="utf-8") as out:
            if _ends_torn(args.out):
                out.write("\n")  # so the first new line is not glued to a torn one
            await asyncio.gather(*(worker(out) for _ in range(args.concurrency)))
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


def _print_report(run: list[dict[str, Any]], rows: list[dict[str, Any]], elapsed: float) -> None:
    """This run's throughput and cost; agreement with gold labels over every result line."""
    errors = sum(row["status"] != "ok" for row in run)
    costs = [row["cost_usd"] for row in run if row["cost_usd"] is not None]
    cost = f"${sum(costs):.6f}" if costs else "unknown"
    if run and len(costs) < len(run) and costs:
        cost += f" (priced for {len(costs)} of {len(run)} cases)"
    rate = len(run) / elapsed if elapsed > 0 else 0.0
    print(f"evaluated {len(run)} cases in {elapsed:.1f}s ({rate:.2f} cases/s), {errors} errors")
    print(f"cost: {cost}")
    latest = {row["id"]: row for row in rows}  # last line per id wins
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


if __name__ == "__main__":
    sys.exit(main())
