"""`tracefact review` and `tracefact labels` on a spans file written by a real pipeline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracefact
from tests.pipeline.helpers import ScriptedEvaluator
from tracefact.cli import main

FLAGGED, FLAGGED_TRUE, PASSED, PASSED_TRUE = 40, 30, 360, 50
"""The evaluator flags 40 answers (30 really hallucinated) and passes 360 (50 hallucinated):
its rate is 10%, the true one 20%."""


def run_traffic(path: Path, probabilities: dict[str, float], capture: bool = True) -> None:
    tracefact.configure(
        exporter=f"file:{path}",
        evaluators=[ScriptedEvaluator()],
        review_probabilities=probabilities,
        capture_content=capture,
    )
    for index in range(FLAGGED + PASSED):
        flagged = index < FLAGGED
        truth = index < FLAGGED_TRUE or FLAGGED <= index < FLAGGED + PASSED_TRUE
        with tracefact.span("answer", kind="llm") as span:
            span.record(
                input=f"{'bad' if truth else 'good'} {index}",
                contexts=["ctx"],
                output="hallucinated" if flagged else "ok",
            )
    assert tracefact.force_flush(10_000)
    tracefact.shutdown()


def people(review_file: Path, reviewers: tuple[str, ...] = ("ana",)) -> list[dict[str, object]]:
    """The labels people give the exported spans: the truth, read off the question."""
    labels = []
    for line in review_file.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        truth = "hallucinated" if record["question"].startswith("bad") else "factual"
        for reviewer in reviewers:
            labels.append(
                {
                    "trace_id": record["trace_id"],
                    "span_id": record["span_id"],
                    "label": truth,
                    "reviewer": reviewer,
                    "time": 1.0,
                }
            )
    return labels


def write_jsonl(path: Path, items: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    return path


def test_export_label_and_correct_every_span_labelled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans, out = tmp_path / "spans.jsonl", tmp_path / "review.jsonl"
    run_traffic(spans, {"*": 1.0})
    assert main(["review", str(spans), "--out", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == FLAGGED + PASSED
    first = records[0]
    assert first["contexts"] == ["ctx"] and first["answer"] in ("hallucinated", "ok")
    assert first["selection"]["probability"] == 1.0
    assert first["verdicts"]["hallucination"]["label"] in ("hallucinated", "factual")
    labels = write_jsonl(tmp_path / "labels.jsonl", people(out, ("ana", "ben")))
    capsys.readouterr()
    assert main(["labels", str(spans), "--labels", str(labels), "--json"]) == 0
    (estimate,) = json.loads(capsys.readouterr().out)
    true_rate = (FLAGGED_TRUE + PASSED_TRUE) / (FLAGGED + PASSED)
    assert estimate["shown"]
    assert estimate["rate"] == pytest.approx(true_rate)
    # Every span labelled by two reviewers who always agree: the labels' rate is exact, and
    # the interval only carries how often such reviewers might still both be wrong: each
    # span's label is the majority of two, wrong with chance e² / (e² + (1-e)²).
    assert estimate["upper"] == pytest.approx(true_rate)
    assert estimate["reviewer_error"][:2] == [0.0, 0.0]
    e = estimate["reviewer_error"][2]
    assert 0 < e < 0.05
    both = e * e / (e * e + (1 - e) ** 2)
    assert estimate["lower"] == pytest.approx((true_rate - both) / (1 - 2 * both))
    assert estimate["evaluator_rate"] == pytest.approx(0.1)
    sensitivity, specificity = estimate["sensitivity"][0], estimate["specificity"][0]
    assert sensitivity == pytest.approx(FLAGGED_TRUE / (FLAGGED_TRUE + PASSED_TRUE))
    assert specificity == pytest.approx(
        (PASSED - PASSED_TRUE) / (PASSED - PASSED_TRUE + FLAGGED - FLAGGED_TRUE)
    )
    assert estimate["agreement"] == {"spans": FLAGGED + PASSED, "rate": 1.0}


def test_a_sample_corrects_the_evaluator_and_thin_strata_withhold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans, out = tmp_path / "spans.jsonl", tmp_path / "review.jsonl"
    run_traffic(spans, {"hallucinated": 1.0, "factual": 0.5})
    assert main(["review", str(spans), "--out", str(out)]) == 0
    labels = people(out)
    assert FLAGGED < len(labels) < FLAGGED + PASSED
    path = write_jsonl(tmp_path / "labels.jsonl", labels)
    capsys.readouterr()
    assert main(["labels", str(spans), "--labels", str(path)]) == 0
    text = capsys.readouterr().out
    assert "corrected rate" in text and "withheld" not in text
    assert all(len(line) <= 80 for line in text.splitlines())
    # the flagged stratum (10% of the weight) with fewer labels than asked for: withheld
    capsys.readouterr()
    assert main(["labels", str(spans), "--labels", str(path), "--min-labels", "50"]) == 0
    text = capsys.readouterr().out
    assert "withheld" in text and "hallucinated (10% of the weight) has 40 of the 50" in text


def test_labels_for_spans_not_selected_are_counted_never_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans, out = tmp_path / "spans.jsonl", tmp_path / "review.jsonl"
    run_traffic(spans, {"hallucinated": 1.0, "factual": 0.0})
    assert main(["review", str(spans), "--out", str(out)]) == 0
    labels = people(out)
    stray = {**labels[0], "span_id": "00000000000000ff"}
    path = write_jsonl(tmp_path / "labels.jsonl", [*labels, stray, {"label": "maybe"}])
    capsys.readouterr()
    assert main(["labels", str(spans), "--labels", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    (estimate,) = json.loads(captured.out)
    assert estimate["unselected_labels"] == 1
    assert "span_id must be 16 hex digits" in captured.err
    assert not estimate["shown"]  # the passed spans (90% of the weight) have no labels


def test_spans_recorded_without_content_cannot_be_reviewed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans, out = tmp_path / "spans.jsonl", tmp_path / "review.jsonl"
    run_traffic(spans, {"*": 1.0}, capture=False)
    assert main(["review", str(spans), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert out.read_text() == ""
    assert f"{FLAGGED + PASSED} spans hold no text to review" in err
    assert "cannot be reviewed" in err


def test_the_report_shows_the_evaluator_against_people(tmp_path: Path) -> None:
    spans, out, page = tmp_path / "spans.jsonl", tmp_path / "review.jsonl", tmp_path / "r.html"
    run_traffic(spans, {"*": 1.0})
    assert main(["review", str(spans), "--out", str(out)]) == 0
    labels = write_jsonl(tmp_path / "labels.jsonl", people(out))
    assert main(["report", str(spans), "--html", str(page), "--labels", str(labels)]) == 0
    html = page.read_text(encoding="utf-8")
    assert "The evaluator against people" in html
    section = html[html.index("The evaluator against people") :]
    assert "20.0%" in section  # the corrected rate, every span labelled
    assert "10.0%" in section  # the evaluator alone
    assert "hallucinated" in section and "factual" in section  # the strata
    assert "over time" in section
    plain = tmp_path / "plain.html"
    assert main(["report", str(spans), "--html", str(plain)]) == 0
    assert "The evaluator against people" not in plain.read_text(encoding="utf-8")


def test_review_readies_phoenix_for_reviewers(tmp_path: Path, fake_phoenix: str) -> None:
    from tests.review.fake_phoenix import FakePhoenix

    spans, out = tmp_path / "spans.jsonl", tmp_path / "review.jsonl"
    run_traffic(spans, {"hallucinated": 1.0, "factual": 0.1})
    assert main(["review", str(spans), "--out", str(out), "--phoenix", fake_phoenix]) == 0
    (config,) = FakePhoenix.configs
    assert config["name"] == "tracefact.review" and config["type"] == "CATEGORICAL"
    assert FakePhoenix.assigned == ["/v1/projects/default/annotation_configs/tracefact.review"]


def test_review_leaves_its_out_file_alone_when_it_cannot_read_the_spans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans, out = tmp_path / "spans.jsonl", tmp_path / "review.jsonl"
    out.write_text("an earlier review\n", encoding="utf-8")
    assert main(["review", str(tmp_path / "typo.jsonl"), "--out", str(out)]) == 2
    assert "No such file" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "an earlier review\n"
    run_traffic(spans, {"*": 1.0})
    before = spans.read_bytes()
    assert main(["review", str(spans), "--out", str(spans)]) == 2
    assert "is the spans file itself" in capsys.readouterr().err
    assert spans.read_bytes() == before


def test_a_labels_file_that_is_not_text_is_reported_line_by_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans = tmp_path / "spans.jsonl"
    run_traffic(spans, {"*": 1.0})
    binary = tmp_path / "labels.jsonl"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    assert main(["labels", str(spans), "--labels", str(binary)]) == 0
    err = capsys.readouterr().err
    assert f"{binary}:1:" in err and "Traceback" not in err
