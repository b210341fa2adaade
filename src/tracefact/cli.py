"""The `tracefact` command.

``tracefact eval`` runs an evaluator over a JSONL file of cases (`tracefact.evaluate_file`,
the engine); ``tracefact collector``
runs the OTLP collector; ``tracefact report`` draws a spans file as one HTML page;
``tracefact monitor`` shows the live rate in the terminal; ``tracefact review`` exports
the spans selected for human review and ``tracefact labels`` turns their labels into the
corrected rate (`tracefact.review.commands`, the engine).

Each subcommand is a function taking the parsed arguments and returning an exit code,
registered in `build_parser`; adding one does not touch the others.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tracefact._imports import require_extra
from tracefact.errors import ConfigurationError, MissingExtraError
from tracefact.evaluators.registry import DEFAULT_SPEC, SPECS


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
    _add_review(commands)
    _add_labels(commands)
    return parser


# --- tracefact collector -----------------------------------------------------------------


def _add_collector(commands: Any) -> None:
    _add_service(
        commands,
        "collector",
        "run the OTLP collector that evaluates LLM spans in flight",
        "Receive OTLP traces (HTTP and gRPC), evaluate sampled LLM spans with the same "
        "pipeline as the SDK, and forward every span to the configured upstreams. Runs "
        "until SIGTERM or SIGINT, then drains. Needs the `collector` extra.",
        _collector_command,
    )


def _add_worker(commands: Any) -> None:
    _add_service(
        commands,
        "worker",
        "evaluate and forward what collectors stored in a durable queue",
        "Take the requests that `tracefact collector` processes stored in the configured "
        "durable queue (queue: redis, or sqlite on the same machine), evaluate their sampled "
        "LLM spans, forward every span upstream and acknowledge them. The same configuration "
        "file as the collectors; receivers are not started. Runs until SIGTERM or SIGINT, "
        "then drains. Needs the `collector` extra (and `redis` for Redis).",
        _worker_command,
    )


def _add_service(
    commands: Any,
    name: str,
    summary: str,
    description: str,
    handler: Callable[[argparse.Namespace], int],
) -> None:
    command = commands.add_parser(name, help=summary, description=description)
    command.add_argument("--config", type=Path, required=True, help="its YAML configuration file")
    command.set_defaults(handler=handler)


def _collector_command(args: argparse.Namespace) -> int:
    return _run_service(args, worker=False)


def _worker_command(args: argparse.Namespace) -> int:
    return _run_service(args, worker=True)


def _run_service(args: argparse.Namespace, *, worker: bool) -> int:
    try:
        require_extra("collector")  # the one extra to name, not each module in turn
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


def _eval_command(args: argparse.Namespace) -> int:
    from tracefact.evaluate_file import EvalFileOptions, run

    # The parser's destinations are the options' names.
    return run(EvalFileOptions(**{f.name: getattr(args, f.name) for f in fields(EvalFileOptions)}))


# --- tracefact report --------------------------------------------------------------------


def _add_report(commands: Any) -> None:
    command = commands.add_parser(
        "report",
        help="the hallucination rates of a spans file, and a self-contained HTML page",
        description="Read a spans file (OTLP/JSON, one export request per line, as "
        'configure(exporter="file:PATH") writes it), print its hallucination rates, and with '
        "--html write one HTML page that needs no "
        "network: the weighted hallucination rate over time with its 95% band by group, the "
        "score distribution, the worst cases with their explanations, evaluator cost and "
        "latency, and coverage (spans by status). Lines that are not export requests are "
        "counted and listed, not fatal.",
    )
    command.add_argument("file", type=Path, help="the spans file")
    command.add_argument("--html", type=Path, help="also write the HTML page here")
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
    command.add_argument(
        "--labels",
        type=Path,
        action="append",
        default=[],
        help="human labels (JSONL) of the spans selected for review: adds the evaluator "
        "against people and the corrected rate; repeatable",
    )
    command.add_argument(
        "--review-window",
        type=_positive_float,
        default=7 * 24 * 3600.0,
        help="seconds of the corrected rate's window (default: 7 days)",
    )
    _add_phoenix_arguments(command)
    command.set_defaults(handler=_report_command)


def _report_command(args: argparse.Namespace) -> int:
    from tracefact.monitor.html import render
    from tracefact.monitor.report import build_report, headline

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
    if args.labels or args.phoenix:
        error = _review_section(report, args)
        if error is not None:
            print(f"tracefact report: {error}", file=sys.stderr)
            return 2
    llm = sum(report.statuses.values())
    judged = report.statuses.get("ok", 0)
    print(f"{args.file}: {report.spans} spans, {llm} LLM spans, {judged} judged")
    for estimate in report.overall:
        print(f"  {estimate.evaluator}: {headline(estimate)}")
        for group in (e for e in report.by_group if e.evaluator == estimate.evaluator):
            labels = ", ".join(f"{k}={v}" for k, v in group.group.items()) or "all"
            print(f"    {labels}: {headline(group)}")
    if args.html is None:
        return 0
    try:
        args.html.write_text(render(report), encoding="utf-8")
    except OSError as exc:
        print(f"tracefact report: {_reason(exc)}", file=sys.stderr)
        return 2
    print(f"report: {args.html.resolve()}")
    return 0


def _review_section(report: Any, args: argparse.Namespace) -> str | None:
    """Put the review section on `report`; the reason it could not be, or None."""
    import httpx

    from tracefact.review.commands import load
    from tracefact.review.report import review_report

    target = _phoenix_target(args)
    try:
        loaded = load(args.file, args.labels, target, window_seconds=args.review_window)
    except (OSError, httpx.HTTPError) as exc:
        return _reason(exc)
    for error in loaded.errors[:5]:
        print(f"tracefact report: {error}", file=sys.stderr)
    sources = [str(p) for p in args.labels] + ([f"Phoenix {target.endpoint}"] if target else [])
    report.review = review_report(
        loaded.ledger,
        report.start or 0.0,
        report.end or 0.0,
        ", ".join(sources),
        loaded.selections,
        loaded.labels,
    )
    return None


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
        "--prometheus",
        metavar="URL",
        type=_metrics_url,
        help="a /metrics endpoint, e.g. http://127.0.0.1:9464",
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
        source = sources.PrometheusSource(args.prometheus)
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


# --- tracefact review / tracefact labels --------------------------------------------------


def _add_phoenix_arguments(command: Any) -> None:
    command.add_argument("--phoenix", metavar="URL", type=_http_url, help="Phoenix's base URL")
    command.add_argument(
        "--project", default="default", help="the Phoenix project (default: default)"
    )
    command.add_argument(
        "--annotation-name",
        default="tracefact.review",
        help="the annotation reviewers label under (default: tracefact.review)",
    )


def _phoenix_target(args: argparse.Namespace) -> Any:
    from tracefact.review.commands import PhoenixTarget

    if not args.phoenix:
        return None
    api_key = os.environ.get("PHOENIX_API_KEY")
    return PhoenixTarget(args.phoenix, args.project, args.annotation_name, api_key)


def _add_review(commands: Any) -> None:
    command = commands.add_parser(
        "review",
        help="export the spans selected for human review",
        description="Write the spans selected for review (tracefact.review.selected) as JSONL: "
        "question, contexts, answer, the evaluator's verdict, ids and the selection record, "
        "as the spans carry them. With --phoenix, also create the categorical annotation "
        "config reviewers label with (filter the spans on tracefact.review.selected).",
    )
    command.add_argument("file", type=Path, help="the spans file")
    command.add_argument("--out", type=Path, required=True, help="the JSONL to write")
    _add_phoenix_arguments(command)
    command.set_defaults(handler=_review_command)


def _review_command(args: argparse.Namespace) -> int:
    import httpx

    from tracefact.review.commands import export
    from tracefact.review.spans import CAPTURE_OFF

    try:
        summary = export(args.file, args.out, _phoenix_target(args))
    except (OSError, ValueError, httpx.HTTPError) as exc:
        print(f"tracefact review: {_reason(exc)}", file=sys.stderr)
        return 2
    if summary.unreviewable or summary.capture_off:
        message = CAPTURE_OFF.format(count=summary.unreviewable + summary.capture_off)
        print(f"tracefact review: {message}", file=sys.stderr)
    print(f"review: {summary.written} of {summary.selected} selected spans written to {args.out}")
    return 0 if summary.written or not (summary.selected or summary.capture_off) else 1


def _add_labels(commands: Any) -> None:
    command = commands.add_parser(
        "labels",
        help="join human labels to the selected spans; print the corrected rate",
        description="Read the spans file's review selections and human labels (JSONL of "
        "trace_id, span_id, label: hallucinated | factual | unsure, reviewer, time; and/or "
        "HUMAN annotations polled from Phoenix), and print each evaluator's corrected "
        "hallucination rate with its 95% interval, its sensitivity and specificity, and "
        "how many more labels would narrow it.",
    )
    command.add_argument("file", type=Path, help="the spans file")
    command.add_argument(
        "--labels", type=Path, action="append", default=[], help="a labels JSONL; repeatable"
    )
    command.add_argument(
        "--save", type=Path, help="append the labels polled from Phoenix to this JSONL"
    )
    command.add_argument(
        "--window",
        type=_positive_float,
        default=7 * 24 * 3600.0,
        help="seconds of the window, by span end time, ending at the newest span (default: 7 days)",
    )
    command.add_argument("--min-labels", type=_positive_int, default=30)
    command.add_argument("--json", action="store_true", help="print JSON instead of text")
    _add_phoenix_arguments(command)
    command.set_defaults(handler=_labels_command)


def _labels_command(args: argparse.Namespace) -> int:
    import httpx

    from tracefact.review.commands import load, write_labels
    from tracefact.review.text import as_json, lines

    try:
        loaded = load(
            args.file,
            args.labels,
            _phoenix_target(args),
            window_seconds=args.window,
            min_labels=args.min_labels,
        )
        if args.save is not None and loaded.polled:
            write_labels(args.save, loaded.polled)
    except (OSError, httpx.HTTPError) as exc:
        print(f"tracefact labels: {_reason(exc)}", file=sys.stderr)
        return 2
    for error in loaded.errors[:5]:
        print(f"tracefact labels: {error}", file=sys.stderr)
    if not loaded.selections:
        print(
            f"tracefact labels: no span in {args.file} carries a review selection "
            "(turn review on: review_probabilities or review_labels_per_day)",
            file=sys.stderr,
        )
        return 2
    estimates = loaded.ledger.estimates()
    if args.json:
        print(json.dumps([as_json(e) for e in estimates], indent=2))
    else:
        for estimate in estimates:
            print("\n".join(lines(estimate)))
    return 0


def _http_url(text: str) -> str:
    """An http(s) URL with a host, else a usage error rather than a traceback at first use."""
    import httpx

    try:
        url = httpx.URL(text)
    except (httpx.InvalidURL, ValueError, TypeError):
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        raise argparse.ArgumentTypeError(f"not an http(s) URL: {text!r}")
    return text


def _metrics_url(text: str) -> str:
    """An http(s) URL; ``http://host:9464`` means its ``/metrics``."""
    url = _http_url(text)
    if urlsplit(url).path.rstrip("/") == "":
        return url.rstrip("/") + "/metrics"
    return url


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def _positive_int(text: str) -> int:
    value = _whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = _whole_number(text)
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


if __name__ == "__main__":
    sys.exit(main())
