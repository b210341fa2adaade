"""`tracefact eval` end to end: a judge against a fake OpenAI server, results, resume, metrics."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import MODEL, Canned, FakeOpenAI, fake_openai
from tracefact.cli import main

RECORDS = [
    # (id, task, output, gold); the fake judge calls an answer hallucinated when it says 1899
    ("qa-1", "QA", "It opened in 1889.", False),
    ("qa-2", "QA", "It opened in 1899.", True),
    ("qa-3", "QA", "It opened in 1899, in Rome.", True),
    ("dlg-1", "dialogue", "Sure, 1889.", False),
    ("dlg-2", "dialogue", "Sure, 1899.", False),  # the judge gets this one wrong
    ("dlg-3", "dialogue", "It was 1777.", True),  # and misses this one
]


def judge_reply(body: dict[str, Any]) -> Canned:
    answer = body["messages"][-1]["content"].split('name="answer">')[1]
    if "BROKEN" in answer:
        return Canned(status=400, content="invalid request")
    verdict = "hallucinated" if "1899" in answer else "factual"
    return Canned(content=json.dumps({"verdict": verdict, "reasons": [f"says {verdict}"]}))


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with fake_openai() as fake:
        fake.responder = judge_reply
        yield fake


def write_cases(path: Path, records: list[dict[str, Any]]) -> Path:
    lines = "".join(json.dumps(r) + "\n" for r in records)
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(lines.encode()))
    else:
        path.write_text(lines)
    return path


def dataset(tmp_path: Path) -> Path:
    records = [
        {
            "id": id_,
            "source": "test",
            "task": task,
            "input": "When did the Eiffel Tower open?",
            "contexts": ["The Eiffel Tower opened in 1889."],
            "output": output,
            "hallucinated": gold,
            "spans": [],
        }
        for id_, task, output, gold in RECORDS
    ]
    return write_cases(tmp_path / "cases.jsonl", records)


def run(server: FakeOpenAI, cases: Path, out: Path, *extra: str) -> int:
    argv = ["eval", str(cases), "--evaluator", f"judge:{MODEL}", "--out", str(out)]
    return main([*argv, "--api-base", server.api_base, "--concurrency", "3", *extra])


def read(out: Path) -> list[dict[str, Any]]:
    """Result rows, after the header line that records the evaluator."""
    header, *rows = (json.loads(line) for line in out.read_text().splitlines())
    assert set(header) == {"tracefact_eval"}
    return rows


def test_eval_writes_results_and_prints_metrics(
    server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results.jsonl"
    assert run(server, dataset(tmp_path), out) == 0
    rows = {row["id"]: row for row in read(out)}
    assert set(rows) == {r[0] for r in RECORDS}
    assert rows["qa-2"] == {
        "id": "qa-2",
        "task": "QA",
        "label": "hallucinated",
        "score": 1.0,
        "status": "ok",
        "error": None,
        "explanation": "says hallucinated",
        "evaluator": f"llm-judge({MODEL})",
        "latency_ms": rows["qa-2"]["latency_ms"],
        "cost_usd": None,
        "hallucinated": True,
    }
    assert rows["qa-2"]["latency_ms"] > 0
    printed = capsys.readouterr().out
    assert "evaluated 6 cases" in printed and "cases/s" in printed
    assert "cost: unknown" in printed
    table = {line.split()[0]: line.split()[1:] for line in printed.splitlines()[2:]}
    # overall: tp=2 (qa-2, qa-3), fp=1 (dlg-2), fn=1 (dlg-3), tn=2
    assert table["all"] == ["6", "0.667", "0.667", "0.667", "0.667"]
    assert table["QA"] == ["3", "1.000", "1.000", "1.000", "1.000"]
    assert table["dialogue"] == ["3", "0.000", "0.000", "0.000", "0.250"]


def test_rerun_skips_ids_already_in_the_output(
    server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases, out = dataset(tmp_path), tmp_path / "results.jsonl"
    assert run(server, cases, out, "--limit", "2") == 0
    assert sorted(row["id"] for row in read(out)) == ["qa-1", "qa-2"]
    with out.open("a") as torn:
        torn.write('{"id": "qa-3", "sta')  # an interrupted write
    assert run(server, cases, out) == 0
    ids = [row["id"] for row in read_valid(out)]
    assert sorted(ids) == sorted(r[0] for r in RECORDS)
    assert len(server.requests) == 6  # two in the first run, four in the second
    printed = capsys.readouterr().out
    assert "resuming: 2 of 6" in printed
    assert "evaluated 4 cases" in printed
    assert any(line.startswith("all") and " 6 " in line for line in printed.splitlines())


def read_valid(out: Path) -> list[dict[str, Any]]:
    rows = []
    for line in out.read_text().splitlines()[1:]:
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def test_plain_gzipped_records_get_derived_ids(
    server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = write_cases(
        tmp_path / "plain.jsonl.gz",
        [
            {"input": "q", "contexts": ["It opened in 1889."], "output": "1889"},
            {"input": "q", "contexts": ["It opened in 1889."], "output": "1899"},
        ],
    )
    out = tmp_path / "out" / "results.jsonl"
    assert run(server, cases, out) == 0
    rows = read(out)
    assert all(row["id"].startswith("sha256-") for row in rows)
    assert {row["label"] for row in rows} == {"factual", "hallucinated"}
    assert all(row["hallucinated"] is None for row in rows)
    assert "precision" not in capsys.readouterr().out  # no gold labels, no metrics
    assert run(server, cases, out) == 0  # derived ids are stable, so nothing is redone
    assert len(read(out)) == 2


def test_failed_cases_are_recorded_as_errors(server: FakeOpenAI, tmp_path: Path) -> None:
    cases = write_cases(
        tmp_path / "cases.jsonl",
        [
            {"id": "ok", "contexts": ["c"], "output": "fine"},
            {"id": "bad", "contexts": ["c"], "output": "BROKEN"},
        ],
    )
    out = tmp_path / "results.jsonl"
    assert run(server, cases, out) == 1
    rows = {row["id"]: row for row in read(out)}
    assert rows["ok"]["status"] == "ok"
    assert rows["bad"]["status"] == "error"
    assert "ProviderError" in rows["bad"]["error"] and "400" in rows["bad"]["error"]
    assert rows["bad"]["label"] is None


def test_lexical_evaluator_needs_no_server(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    assert main(["eval", str(dataset(tmp_path)), "--out", str(out), "--evaluator", "lexical"]) == 0
    assert len(read(out)) == len(RECORDS)
    assert {row["evaluator"].split("(")[0] for row in read(out)} == {"lexical-overlap"}


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases, out = dataset(tmp_path), str(tmp_path / "r.jsonl")
    assert main(["eval", str(cases), "--out", out, "--evaluator", "judge"]) == 2
    assert main(["eval", str(cases), "--out", out, "--evaluator", "oracle"]) == 2
    bad = write_cases(tmp_path / "bad.jsonl", [{"input": "no output"}])
    assert main(["eval", str(write_cases(tmp_path / "list.jsonl", [[1]])), "--out", out]) == 2
    assert main(["eval", str(bad), "--out", out]) == 2
    assert "bad.jsonl:1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([])
    with pytest.raises(SystemExit):
        main(["eval", str(cases), "--out", out, "--concurrency", "0"])


def test_default_evaluator_is_the_local_model_and_help_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    assert "(default: local)" in " ".join(capsys.readouterr().out.split())
    out = tmp_path / "results.jsonl"
    cases = write_cases(
        tmp_path / "cases.jsonl",
        [{"id": "a", "contexts": ["The tower opened in 1889."], "output": "It opened in 1889."}],
    )
    assert main(["eval", str(cases), "--out", str(out)]) == 0
    header = json.loads(out.read_text().splitlines()[0])["tracefact_eval"]
    assert header["evaluator"]["evaluator"] == "local-factuality"
    assert read(out)[0]["evaluator"].startswith("local-factuality")


def test_resume_refuses_a_file_written_by_another_evaluator(
    server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases, out = dataset(tmp_path), tmp_path / "results.jsonl"
    assert main(["eval", str(cases), "--out", str(out), "--evaluator", "lexical"]) == 0
    lexical_rows = read(out)
    assert run(server, cases, out) == 2
    err = capsys.readouterr().err
    assert "written by another evaluator (lexical-overlap)" in err and "--force" in err
    assert read(out) == lexical_rows and not server.requests  # untouched, nothing evaluated
    assert main(["eval", str(cases), "--out", str(out), "--evaluator", "lexical:0.9"]) == 2
    assert run(server, cases, out, "--force") == 0  # starts the file over with the judge
    assert len(server.requests) == len(RECORDS)
    rows = read(out)
    assert {row["evaluator"] for row in rows} == {f"llm-judge({MODEL})"}
    header = json.loads(out.read_text().splitlines()[0])["tracefact_eval"]["evaluator"]
    assert header["model"] == MODEL and header["evaluator"] == "llm-judge"


def test_resume_refuses_a_file_without_a_recorded_evaluator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results.jsonl"
    out.write_text(json.dumps({"id": "qa-1", "status": "ok", "label": "factual"}) + "\n")
    argv = ["eval", str(dataset(tmp_path)), "--out", str(out), "--evaluator", "lexical"]
    assert main(argv) == 2
    assert "unrecorded evaluator" in capsys.readouterr().err


def test_rerun_retries_errored_rows_by_default(server: FakeOpenAI, tmp_path: Path) -> None:
    cases = write_cases(
        tmp_path / "cases.jsonl",
        [
            {"id": "ok", "contexts": ["c"], "output": "fine"},
            {"id": "flaky", "contexts": ["c"], "output": "BROKEN"},
        ],
    )
    out = tmp_path / "results.jsonl"
    assert run(server, cases, out) == 1
    assert run(server, cases, out, "--no-retry-errors") == 0  # nothing to do
    assert len(server.requests) == 2
    server.responder = lambda body: Canned(content='{"verdict": "factual", "reasons": []}')
    assert run(server, cases, out) == 0  # the errored id is evaluated again, and now passes
    assert len(server.requests) == 3
    latest = {row["id"]: row["status"] for row in read(out)}
    assert latest == {"ok": "ok", "flaky": "ok"}


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("deep.jsonl", b"[" * 100_000 + b"\n", "deep.jsonl:1: not a valid case: nested too deeply"),
        ("cut.jsonl.gz", gzip.compress(b'{"output": "x"}\n' * 50)[:-12], "truncated or corrupt"),
        ("bad.jsonl.gz", b"not gzip at all", "truncated or corrupt"),
        (
            "typed.jsonl",
            b'{"input": "q", "contexts": "one text", "output": "a"}\n',
            "typed.jsonl:1: not a valid case: contexts: Input should be a valid list",
        ),
    ],
)
def test_unreadable_case_files_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: bytes, message: str
) -> None:
    (tmp_path / name).write_bytes(content)
    argv = ["eval", str(tmp_path / name), "--out", str(tmp_path / "r.jsonl"), "--evaluator"]
    assert main([*argv, "lexical"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_results_file_that_is_not_ours_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results.jsonl"
    out.write_text('{"id": 7, "status": "ok"}\n{"id": ["x"]}\n')
    assert main(["eval", str(dataset(tmp_path)), "--out", str(out), "--evaluator", "lexical"]) == 2
    assert "results.jsonl:1: not a tracefact result line" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "soon"])
def test_timeout_must_be_a_positive_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", str(dataset(tmp_path)), "--out", str(tmp_path / "r"), "--timeout", value])
    assert exit_info.value.code == 2
    assert "--timeout" in capsys.readouterr().err


def test_the_report_says_why_cases_failed(
    server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = write_cases(
        tmp_path / "cases.jsonl",
        [{"id": f"bad-{i}", "contexts": ["c"], "output": "BROKEN"} for i in range(2)],
    )
    assert run(server, cases, tmp_path / "results.jsonl") == 1
    lines = capsys.readouterr().out.splitlines()
    assert "2 errors" in lines[0]
    assert lines[1].startswith("  2 × ProviderError: BadRequestError (HTTP 400)"), lines


def test_a_resumed_run_prices_every_result_as_the_first_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results.jsonl"
    argv = ["eval", str(dataset(tmp_path)), "--out", str(out), "--evaluator", "lexical"]
    assert main(argv) == 0
    [first] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("cost:")]
    assert main(argv) == 0  # nothing left to do
    [again] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("cost:")]
    assert again == f"cost: $0.000000 this run, {first.removeprefix('cost: ')} for every result"


def test_a_lone_surrogate_in_a_case_costs_no_line(tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    records = [
        {"id": "plain", "input": "q", "contexts": ["Zebras graze."], "output": "Zebras graze."},
        {"id": "odd", "input": "q", "contexts": ["Zebras graze."], "output": "Bad \ud800 zebra."},
    ]
    cases.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "results.jsonl"
    assert main(["eval", str(cases), "--out", str(out), "--evaluator", "lexical"]) == 0
    assert {row["id"]: row["status"] for row in read(out)} == {"plain": "ok", "odd": "ok"}
