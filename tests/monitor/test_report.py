"""`tracefact report`: a spans file in, one self-contained HTML page out."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import tracefact
from tests.monitor.spans import evaluated, spans_file
from tests.pipeline.helpers import ScriptedEvaluator
from tracefact import semconv
from tracefact.cli import main
from tracefact.evaluators.lexical import LexicalOverlap
from tracefact.monitor.report import MAX_POINTS, build_report
from tracefact.spans_file import SpansFileReader

T0 = 1_780_000_000.0
CORPUS = "The Eiffel Tower was completed in 1889 and is 330 metres tall."
INVENTED = "The Eiffel Tower was painted green by Napoleon during a Martian festival."


pytestmark = pytest.mark.usefixtures("fresh_globals")


@tracefact.retriever
def search(query: str) -> list[str]:
    return [CORPUS]


def ask(model: str, invent: bool) -> None:
    with tracefact.span("answer", kind="chain"):
        search("Eiffel Tower")
        with tracefact.span("generate", kind="llm", model=model) as span:
            span.record(
                input="When was the Eiffel Tower completed?", output=INVENTED if invent else CORPUS
            )


def run_app(path: Path, attach: str = "enrich") -> None:
    """The real pipeline: 10 answers from each model, 3 and 6 of them invented."""
    tracefact.configure(
        service_name="report-app",
        exporter=f"file:{path}",
        evaluators=[LexicalOverlap()],
        attach=attach,  # type: ignore[arg-type]
    )
    for i in range(10):
        ask("model-a", invent=i < 3)
        ask("model-b", invent=i < 6)
    assert tracefact.force_flush(10_000)
    tracefact.shutdown()


def report_page(spans: Path, tmp_path: Path, *options: str) -> str:
    out = tmp_path / "report.html"
    assert main(["report", str(spans), "--html", str(out), *options]) == 0
    return out.read_text(encoding="utf-8")


def rate_row(page: str, group: str) -> list[str]:
    """The cells of the rate table's row for `group`."""
    row = re.search(rf"<tr><td>hallucination</td><td>{re.escape(group)}</td>(.*?)</tr>", page)
    assert row is not None, group
    return re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))


@pytest.mark.parametrize("attach", ["enrich", "span"])
def test_report_of_a_real_run_shows_each_models_rate(
    tmp_path: Path, attach: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spans = tmp_path / "spans.jsonl"
    run_app(spans, attach)
    page = report_page(spans, tmp_path)
    assert "report:" in capsys.readouterr().out
    assert rate_row(page, "model=model-a")[:1] == ["30.0%"]
    assert rate_row(page, "model=model-b")[:1] == ["60.0%"]
    assert rate_row(page, "all")[:1] == ["45.0%"]
    assert rate_row(page, "model=model-a")[2] == "10"  # judged once each, carriers merged
    assert INVENTED in page  # a worst case, with its question and explanation
    assert "<b>6 times</b>" in page and "<b>3 times</b>" in page  # one card per model
    assert "When was the Eiffel Tower completed?" in page
    assert "content words" in page or "missing" in page
    assert page.count("<svg") >= 3  # rate over time, scores, statuses


def test_the_page_loads_nothing_and_escapes_span_text(tmp_path: Path) -> None:
    spans = tmp_path / "spans.jsonl"
    attack = '<script>alert("x")</script><img src="https://example.invalid/x.png">'
    with spans_file(spans) as writer:
        writer.span("llm", evaluated("hallucinated", question=attack, answer=attack), T0)
        writer.span("llm", evaluated("factual"), T0 + 1)
    page = report_page(spans, tmp_path)
    assert "<script" not in page and "<img" not in page and "<link" not in page
    assert "&lt;script&gt;" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page


def test_sample_rates_weigh_the_rate(tmp_path: Path) -> None:
    """5 of 10 fully judged spans hallucinated, 0 of 10 spans judged at 10%: 5 / 110."""
    spans = tmp_path / "spans.jsonl"
    with spans_file(spans) as writer:
        for i in range(10):
            writer.span("llm", evaluated("hallucinated" if i < 5 else "factual"), T0 + i)
            writer.span("llm", evaluated("factual", rate=0.1), T0 + i + 0.5)
    (estimate,) = build_report(spans).overall
    assert estimate.rate == pytest.approx(5 / 110)
    assert rate_row(report_page(spans, tmp_path), "all")[0] == "4.5%"


def test_rate_over_time_follows_a_step_and_groups_split(tmp_path: Path) -> None:
    spans = tmp_path / "spans.jsonl"
    with spans_file(spans) as writer:
        for i in range(200):  # 100 s: model m1 at 10%, then 60% from the middle on
            hallucinated = (i % 10 == 0) if i < 100 else (i % 10 < 6)
            writer.span("llm", evaluated("hallucinated" if hallucinated else "factual"), T0 + i / 2)
            writer.span("llm", evaluated("factual", model="m2"), T0 + i / 2 + 0.1)
    report = build_report(spans, window_seconds=10)
    series = {s.group["model"]: s.points for s in report.series}
    assert set(series) == {"m1", "m2"}
    first = min(series["m1"], key=lambda p: abs(p.time - (T0 + 40)))  # its window: 30-40 s
    last = series["m1"][-1]
    assert first.rate == pytest.approx(0.1) and last.rate == pytest.approx(0.6)
    assert first.upper < last.lower  # the step is outside both intervals
    assert all(p.rate == 0 for p in series["m2"])
    times = [p.time for p in series["m1"]]
    assert times == sorted(times) and times[0] >= T0 and times[-1] <= T0 + 101


def test_coverage_counts_every_status(tmp_path: Path) -> None:
    spans = tmp_path / "spans.jsonl"
    with spans_file(spans) as writer:
        statuses = ["ok"] * 6 + ["dropped"] * 2 + ["timeout", "error", "sampled_out", "skipped"]
        for i, status in enumerate(statuses):
            label = "factual" if status == "ok" else None
            attributes = evaluated(label, status=status)
            if status == "skipped":
                attributes[semconv.EVAL_SKIP_REASON] = semconv.SKIP_NO_CONTEXTS
            writer.span("llm", attributes, T0 + i)
        writer.span("db query", {"db.system": "postgresql"}, T0)
        writer.span("llm", {"openinference.span.kind": "LLM"}, T0)  # no pipeline saw it
    report = build_report(spans)
    assert dict(report.statuses) == {
        "(not evaluated)": 1,
        "ok": 6,
        "dropped": 2,
        "timeout": 1,
        "error": 1,
        "sampled_out": 1,
        "skipped": 1,
    }
    (estimate,) = report.overall
    assert estimate.coverage == pytest.approx(6 / 10)
    page = report_page(spans, tmp_path)
    assert "no_contexts 1" in page
    assert rate_row(page, "all")[4] == "60.0%"


def test_bad_lines_are_counted_and_shown_not_fatal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans = tmp_path / "spans.jsonl"
    with spans_file(spans) as writer:
        writer.span("llm", evaluated("factual"), T0)
    with spans.open("a") as out:
        out.write("garbage\n{}\n[]\n")
    page = report_page(spans, tmp_path)
    err = capsys.readouterr().err
    assert "2 of 4 lines were not OTLP/JSON export requests" in err
    assert f"{spans}:2:" in err and f"{spans}:4:" in err
    assert "2 lines were not OTLP/JSON export requests" in page
    assert "line 2:" in page and "line 4:" in page


def test_unusable_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.html"
    assert main(["report", str(tmp_path / "missing.jsonl"), "--html", str(out)]) == 2
    assert "No such file or directory" in capsys.readouterr().err
    junk = tmp_path / "junk.jsonl"
    junk.write_text("nothing here\n")
    assert main(["report", str(junk), "--html", str(out)]) == 2
    assert "no spans in" in capsys.readouterr().err
    assert not out.exists()
    assert main(["report", str(tmp_path), "--html", str(out)]) == 2
    assert "Is a directory" in capsys.readouterr().err


def test_the_installed_command(tmp_path: Path) -> None:
    spans = tmp_path / "spans.jsonl"
    with spans_file(spans) as writer:
        writer.span("llm", evaluated("hallucinated"), T0)
    out = tmp_path / "page.html"
    ran = subprocess.run(
        [
            Path(sys.executable).with_name("tracefact"),
            "report",
            spans,
            "--html",
            out,
            "--group-by",
            "service",
            "--group-by",
            "model",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert "service=report-test, model=m1" in out.read_text()


def test_a_short_window_over_a_long_run_keeps_charts_bounded(tmp_path: Path) -> None:
    spans = tmp_path / "spans.jsonl"
    with spans_file(spans) as writer:
        for i in range(1000):  # an hour, one span every 3.6 s
            writer.span("llm", evaluated("factual"), T0 + i * 3.6)
    (series,) = build_report(spans, window_seconds=5).series
    assert 300 <= len(series.points) <= MAX_POINTS + 2


def test_results_held_past_the_limit_count_once_for_each_evaluator(tmp_path: Path) -> None:
    """Slow answers leave first as `timeout`, their results follow on carriers."""
    spans = tmp_path / "spans.jsonl"
    tracefact.configure(
        exporter=f"file:{spans}",
        evaluators=[ScriptedEvaluator("judge-a", cost=0.001), ScriptedEvaluator("judge-b")],
        max_hold_seconds=0.05,
    )
    for i in range(8):
        with tracefact.span("generate", kind="llm", model="m") as span:
            search("Eiffel Tower")
            span.record(input="When?", output="hallucinated" if i < 2 else "slow:0.3")
    assert tracefact.force_flush(10_000)
    tracefact.shutdown()
    exported = [f.span.attributes for f in SpansFileReader(spans).read()]
    assert sum(a.get("openinference.span.kind") == "EVALUATOR" for a in exported) == 6
    assert sum(a.get("tracefact.eval.status") == "timeout" for a in exported) == 6

    report = build_report(spans)
    assert dict(report.statuses) == {"ok": 8}
    rates = {e.evaluator: (e.rate, e.totals.judged, e.group) for e in report.by_group}
    assert rates == {
        "judge-a": (0.25, 8, {"model": "m"}),
        "judge-b": (0.25, 8, {"model": "m"}),
    }
    (cost,) = report.costs
    assert (cost.evaluated, cost.priced, cost.usd) == (8, 8, pytest.approx(0.008))
    page = report_page(spans, tmp_path)
    assert "judge-a: rate over time" in page and "judge-b: rate over time" in page


def test_importing_tracefact_and_its_cli_loads_no_report_or_view_code() -> None:
    """`import tracefact` stays light: the report and the view load on use.

    (rich itself is not checked: httpx imports it for its own command line when present.)
    """
    code = (
        "import sys, tracefact, tracefact.cli\n"
        "names = ('prometheus_client', 'tracefact.monitor.report', 'tracefact.monitor.html',"
        " 'tracefact.monitor.terminal', 'tracefact.monitor.sources')\n"
        "loaded = [m for m in names if m in sys.modules]\n"
        "print(loaded)\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]"


def test_a_two_span_file_draws_no_empty_chart_and_whole_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Small input: no chart of one point, no repeated x labels, a histogram axis in spans."""
    spans = tmp_path / "spans.jsonl"
    with spans_file(spans) as writer:
        writer.span("generate", evaluated("hallucinated", model="a"), T0)
        writer.span("generate", evaluated("factual", model="b"), T0 + 0.01)
    page = report_page(spans, tmp_path)
    assert "Too few judged spans over time for a chart" in page
    assert "<polyline" not in page
    histogram = page.split("score histogram", 1)[1].split("</svg>", 1)[0]
    axis = re.findall(r'text-anchor="end">(\d+)</text>', histogram)
    assert axis == sorted(set(axis), key=int), axis  # 0, 1: each count once
    worst = page.split("<h2>Worst cases</h2>", 1)[1].split("<h2>", 1)[0]
    assert "judged hallucinated" in worst and "judged factual" not in worst


def printed_report(spans: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The lines `tracefact report SPANS` prints (it must succeed)."""
    capsys.readouterr()
    assert main(["report", str(spans)]) == 0
    return capsys.readouterr().out.splitlines()


def test_report_prints_the_headline_rates_and_html_is_optional(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans = tmp_path / "spans.jsonl"
    run_app(spans)
    lines = printed_report(spans, capsys)
    assert lines[0].endswith("20 LLM spans, 20 judged")
    assert lines[1].startswith("  hallucination: 45.0% hallucinated (95%: ")
    assert any(line.startswith("    model=model-a: 30.0% hallucinated") for line in lines)
    assert not list(tmp_path.glob("*.html"))


def test_monitor_once_keeps_the_rate_at_80_columns(tmp_path: Path) -> None:
    spans = tmp_path / "spans.jsonl"
    with spans_file(spans) as writer:
        for i in range(4):
            labels = {"model": "a-model-with-a-rather-long-name-for-a-narrow-terminal"}
            attributes = evaluated("hallucinated" if i else "factual", model=labels["model"])
            writer.span("generate", attributes, T0 + i)
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "tracefact"),
            "monitor",
            "--once",
            "--spans",
            str(spans),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "80", "LINES": "40", "PATH": ""},
    )
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in done.stdout.splitlines()) <= 80
    header = next(line for line in done.stdout.splitlines() if "group" in line)
    assert "rate" in header.split() and "coverage" in header.split(), done.stdout
    assert "75.0%" in done.stdout, done.stdout


def test_a_span_the_file_holds_twice_counts_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans = tmp_path / "spans.jsonl"
    run_app(spans)
    once = printed_report(spans, capsys)[0]
    twice = tmp_path / "twice.jsonl"
    twice.write_bytes(spans.read_bytes() * 2)  # an exporter that retried the whole file
    assert printed_report(twice, capsys)[0] == once.replace(str(spans), str(twice))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["monitor", "--prometheus", "http://localhost:abc", "--once"], "not an http(s) URL"),
        (["monitor", "--prometheus", "http://[::1", "--once"], "not an http(s) URL"),
        (["report", "spans.jsonl", "--phoenix", "localhost:6006"], "not an http(s) URL"),
        (["report", "spans.jsonl", "--worst", "abc"], "not a whole number: 'abc'"),
    ],
)
def test_bad_option_values_are_usage_errors(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(arguments)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
