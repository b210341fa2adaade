"""The spans file: OTLP/JSON, one `ExportTraceServiceRequest` per line.

Written by `SpanFileExporter` (``configure(exporter="file:spans.jsonl")``), read by
`tracefact report` and followed by `tracefact monitor`. The lines are what an OTLP/HTTP
JSON receiver accepts (hex ids, integer enums), so `conventions.otlp` reads them as it
reads the recorded fixtures. Each export is one write of one whole line: a reader that
tails the file takes complete lines only and never sees half a request.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from tracefact.conventions.otlp import OtlpSpan
from tracefact.conventions.otlp import resource_spans_from_otlp_json as resource_spans

logger = logging.getLogger("tracefact")

FILE_PREFIX = "file:"
"""``exporter="file:PATH"``: the spelling of this exporter among the exporter names."""

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")
TAIL_BYTES = 256
BLOCK_BYTES = 1 << 20


class SpanFileExporter(SpanExporter):
    """Appends each batch of spans to `path` as one line of OTLP/JSON.

    The file is opened (and created) here, so a path that cannot be written fails at
    `configure()`; a write that fails later is logged and reported as a failed export,
    which the export stage counts as dropped.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        # Unbuffered: each line goes to the OS in whole writes, nothing waits in Python.
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - closed by shutdown
        self._lock = threading.Lock()  # one line at a time, and none after shutdown

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        line = json.dumps(otlp_json(spans), separators=(",", ":")).encode() + b"\n"
        with self._lock:
            if self._file.closed:
                return SpanExportResult.FAILURE
            start = self._end()
            try:
                view = memoryview(line)
                while view:  # a regular file takes it at once; a pipe may not
                    written = self._file.write(view)
                    view = view[written or 0 :]
            except OSError:
                logger.exception("tracefact: could not write spans to %s", self.path)
                self._cut_back(start)
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def _end(self) -> int | None:
        """Where the next line starts; None where the file cannot seek (a pipe)."""
        try:
            return os.lseek(self._file.fileno(), 0, os.SEEK_END)
        except OSError:
            return None

    def _cut_back(self, start: int | None) -> None:
        """Take a line written in part back out: the next would be glued to it, unreadable."""
        if start is None:
            return
        try:
            os.ftruncate(self._file.fileno(), start)
        except OSError:
            logger.exception("tracefact: could not take a partial line out of %s", self.path)

    def shutdown(self) -> None:
        with self._lock:
            self._file.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # nothing is buffered


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """Spans as one OTLP/JSON `ExportTraceServiceRequest`, encoded as the OTLP exporter does.

    Protobuf's JSON mapping writes bytes as base64; OTLP/JSON wants trace and span ids
    as hex, so those are rewritten.
    """
    document: dict[str, Any] = json_format.MessageToDict(
        encode_spans(spans), use_integers_for_enums=True
    )
    for per_resource in document.get("resourceSpans", []):
        for scope_spans in per_resource.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                _hex_ids(span)
                for link in span.get("links", []):
                    _hex_ids(link)
    return document


def _hex_ids(item: dict[str, Any]) -> None:
    for key in _ID_FIELDS:
        if key in item:
            item[key] = base64.b64decode(item[key]).hex()


@dataclass(frozen=True, slots=True)
class FileSpan:
    """A span read from a spans file, with its resource's attributes (service.name...)."""

    resource: Mapping[str, Any]
    span: OtlpSpan


@dataclass(frozen=True, slots=True)
class BadLine:
    number: int
    reason: str


@dataclass
class SpansFileReader:
    """Reads a spans file, and on later calls only what was appended since.

    A line that is not an OTLP/JSON request is counted (`bad_lines`, the first
    `keep_bad` kept with their reasons), never raised. A last line with no newline yet
    is left for the next call, unless `final` says the writer is done.
    """

    path: Path
    keep_bad: int = 20
    lines: int = 0
    bad_count: int = 0
    bad_lines: list[BadLine] = field(default_factory=list)
    _offset: int = 0
    _tail: bytes = b""
    """The last bytes read: when they are gone from where they were, the file was replaced."""

    def read(self, final: bool = False) -> list[FileSpan]:
        """Spans of the complete lines appended since the last call (OSError if unreadable)."""
        return list(self.follow(final))

    def follow(self, final: bool = False) -> Iterator[FileSpan]:
        """The same as `read`, a block of lines at a time: memory stays that of one block.

        A caller that stops early leaves the rest of the block for the next call.
        """
        with self.path.open("rb") as handle:
            handle.seek(max(0, self._offset - len(self._tail)))
            if handle.read(len(self._tail)) != self._tail:  # truncated or replaced: start over
                self._offset, self._tail = 0, b""
            handle.seek(self._offset)
            pending = b""
            while True:
                block = handle.read(BLOCK_BYTES)
                data = pending + block
                end = len(data) if final and not block else data.rfind(b"\n") + 1
                if end:
                    spans = self._lines(data[:end])
                    self._offset += end
                    self._tail = data[max(0, end - TAIL_BYTES) : end]
                    yield from spans
                pending = data[end:]
                if not block:
                    return

    def _lines(self, data: bytes) -> list[FileSpan]:
        spans: list[FileSpan] = []
        for raw in data.splitlines():
            self.lines += 1
            if raw.strip():
                spans.extend(self._parse(raw))
        return spans

    def _parse(self, raw: bytes) -> list[FileSpan]:
        try:
            document = json.loads(raw)
            if not isinstance(document, dict):
                raise TypeError(f"a JSON {type(document).__name__}, not an object")
            return [FileSpan(resource, span) for resource, span in resource_spans(document)]
        except RecursionError:
            self._bad("not an OTLP/JSON export request: nested too deeply")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self._bad(f"not an OTLP/JSON export request: {type(exc).__name__}: {exc}")
        return []

    def _bad(self, reason: str) -> None:
        self.bad_count += 1
        if len(self.bad_lines) < self.keep_bad:
            self.bad_lines.append(BadLine(self.lines, reason))
