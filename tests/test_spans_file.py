"""The spans file: written by configure(exporter="file:PATH"), read back line by line."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

import tracefact
from tracefact.conventions import read_case
from tracefact.evaluators.lexical import LexicalOverlap
from tracefact.spans_file import SpanFileExporter, SpansFileReader

pytestmark = pytest.mark.usefixtures("fresh_globals")


@tracefact.retriever
def search(query: str) -> list[str]:
    return ["Paris is the capital of France.", "The Seine flows through Paris."]


@tracefact.llm(name="answer", model="fake-1")
def answer(question: str) -> str:
    search(question)
    return "Paris is the capital of France."


def test_file_exporter_writes_what_the_otlp_reader_reads(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    shown = InMemorySpanExporter()
    tracefact.configure(
        service_name="file-test",
        exporter=[f"file:{path}", shown],
        evaluators=[LexicalOverlap()],
    )
    for _ in range(3):
        answer("What is the capital of France?")
    assert tracefact.force_flush(10_000)
    tracefact.shutdown()

    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines and all(json.loads(line)["resourceSpans"] for line in lines)
    reader = SpansFileReader(path)
    read = reader.read()
    assert reader.bad_count == 0 and reader.lines == len(lines)
    expected = {
        (s.context.trace_id, s.context.span_id, s.name)
        for s in shown.get_finished_spans()
        if s.context is not None
    }
    assert {(f.span.trace_id, f.span.span_id, f.span.name) for f in read} == expected
    assert len(read) == len(expected) == 6  # every span once, hex ids as the SDK's
    assert {f.resource["service.name"] for f in read} == {"file-test"}
    llm_spans = [f.span for f in read if f.span.name == "answer"]
    for span in llm_spans:
        assert span.attributes["tracefact.eval.status"] == "ok"
        assert span.attributes["tracefact.eval.sample_rate"] == 1.0
        assert span.attributes["tracefact.eval.hallucination.label"] == "factual"
        assert span.parent_span_id is None
        assert [name for name, _ in span.events] == ["gen_ai.evaluation.result"]
    retriever = next(f.span for f in read if f.span.name == "search")
    assert retriever.parent_span_id in {s.span_id for s in llm_spans}
    case = read_case(llm_spans[0].attributes, llm_spans[0].events).case
    assert case is not None and case.output == "Paris is the capital of France."


def test_environment_spelling_and_bad_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "from-env.jsonl"
    monkeypatch.setenv("TRACEFACT_EXPORTER", f"file:{path}")
    tracefact.configure(evaluators=[])
    answer("q")
    assert tracefact.force_flush(10_000)
    assert [f.span.name for f in SpansFileReader(path).read()] == ["search", "answer"]
    with pytest.raises(ValueError, match=r"file: needs a path"):
        tracefact.configure(exporter="file:")
    with pytest.raises(FileNotFoundError, match="no-such-dir"):
        tracefact.configure(exporter=f"file:{tmp_path / 'no-such-dir' / 'spans.jsonl'}")


def test_a_reader_tailing_the_file_sees_whole_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    exporter = SpanFileExporter(path)
    tracefact.configure(
        exporter=exporter, evaluators=[], export_batch_size=7, export_delay_seconds=0.01
    )
    reader = SpansFileReader(path)
    seen: list[int] = []
    done = threading.Event()

    def tail() -> None:
        while not done.is_set():
            seen.extend(f.span.span_id for f in reader.read())

    tailer = threading.Thread(target=tail)
    tailer.start()
    for i in range(300):
        answer(f"question {i}")
    assert tracefact.force_flush(10_000)
    done.set()
    tailer.join()
    seen.extend(f.span.span_id for f in reader.read(final=True))
    assert reader.bad_count == 0
    assert len(seen) == len(set(seen)) == 600


def test_bad_lines_are_counted_and_a_torn_last_line_waits(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    exporter = SpanFileExporter(path)
    tracefact.configure(exporter=exporter, evaluators=[])
    answer("q")
    assert tracefact.force_flush(10_000)
    good = path.read_bytes()
    with path.open("ab") as out:
        out.write(b"not json\n[1, 2]\n" + b"[" * 5000 + b"\n")
        out.write(b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "zz"}]}]}]}\n')
        out.write(good[: len(good) // 2])  # a writer half way through a line
    reader = SpansFileReader(path)
    assert len(reader.read()) == 2
    assert reader.bad_count == 4
    assert [b.number for b in reader.bad_lines] == [2, 3, 4, 5]
    assert "not an object" in reader.bad_lines[1].reason
    assert "nested too deeply" in reader.bad_lines[2].reason
    assert "traceId" in reader.bad_lines[3].reason
    with path.open("ab") as out:
        out.write(good[len(good) // 2 :])  # the writer finishes the line
    assert len(reader.read()) == 2 and reader.bad_count == 4
    assert reader.read() == []


def test_export_after_shutdown_fails_instead_of_raising(tmp_path: Path) -> None:
    exporter = SpanFileExporter(tmp_path / "spans.jsonl")
    exporter.shutdown()
    spans = InMemorySpanExporter()
    tracefact.configure(exporter=spans, evaluators=[])
    answer("q")
    assert tracefact.force_flush(10_000)
    assert exporter.export(spans.get_finished_spans()) is SpanExportResult.FAILURE


def test_a_truncated_file_is_read_again_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    tracefact.configure(exporter=SpanFileExporter(path), evaluators=[])
    answer("q")
    assert tracefact.force_flush(10_000)
    reader = SpansFileReader(path)
    assert len(reader.read()) == 2
    path.write_bytes(b"")  # rotated: the writer keeps appending to the emptied file
    answer("again")
    assert tracefact.force_flush(10_000)
    assert [f.span.name for f in reader.read()] == ["search", "answer"]


def test_lines_longer_than_a_block_are_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "spans.jsonl"
    tracefact.configure(exporter=SpanFileExporter(path), evaluators=[], export_batch_size=2)
    for i in range(5):
        answer(f"question {i}")
    assert tracefact.force_flush(10_000)
    whole = [f.span.span_id for f in SpansFileReader(path).read()]
    monkeypatch.setattr("tracefact.spans_file.BLOCK_BYTES", 7)
    reader = SpansFileReader(path)
    assert [f.span.span_id for f in reader.follow(final=True)] == whole
    assert len(whole) == 10 and reader.bad_count == 0 and reader.lines == 5


class _FailingMidLine:
    """The file as a full disk leaves it: a write takes part of the line, then fails."""

    def __init__(self, file: Any) -> None:
        self.file = file
        self.closed = False

    def write(self, data: memoryview) -> int:
        self.file.write(data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    def fileno(self) -> int:
        return int(self.file.fileno())


def test_a_line_written_in_part_is_taken_back_out(tmp_path: Path) -> None:
    """Else the next line is glued to it: that batch, reported exported, could not be read."""
    path = tmp_path / "spans.jsonl"
    exporter = SpanFileExporter(path)
    spans = InMemorySpanExporter()
    tracefact.configure(exporter=spans, evaluators=[])
    for question in ("first", "lost", "after"):
        answer(question)
    assert tracefact.force_flush(10_000)
    first, lost, after = (
        [s for s in spans.get_finished_spans() if s.attributes.get("input.value") == q]
        for q in ("first", "lost", "after")
    )
    assert exporter.export(first) is SpanExportResult.SUCCESS
    real = exporter._file
    exporter._file = _FailingMidLine(real)  # type: ignore[assignment]
    assert exporter.export(lost) is SpanExportResult.FAILURE
    exporter._file = real
    assert exporter.export(after) is SpanExportResult.SUCCESS
    exporter.shutdown()
    reader = SpansFileReader(path)
    read = reader.read(final=True)
    assert reader.bad_count == 0
    assert len(read) == len(first) + len(after)


def test_a_lone_surrogate_in_a_span_name_costs_no_span_of_its_batch(tmp_path: Path) -> None:
    """OTLP's encoders refuse it in a name, an event name or a status text: repaired."""
    path = tmp_path / "spans.jsonl"
    tracefact.configure(exporter=f"file:{path}", evaluators=[])
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("plain"):
        pass
    with tracer.start_as_current_span("odd \ud800 name") as span:
        span.add_event("odd \udfff event")
        span.set_status(Status(StatusCode.ERROR, "odd \ud800 status"))
    assert tracefact.force_flush(10_000)
    names = sorted(s.span.name for s in SpansFileReader(path).read(final=True))
    assert names == ["odd ? name", "plain"]
