"""OTLP/HTTP request bodies to `ExportTraceServiceRequest`: protobuf or JSON, gzip or not.

OTLP/JSON is not protobuf's canonical JSON: trace and span ids are hex strings (not
base64), and enums may be integers; unknown fields are ignored, as the specification
asks. Every failure is a `BadRequest` with the HTTP status and a message for the client.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections.abc import Iterator
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracefact import semconv

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class BadRequest(Exception):
    """A request the collector refuses: its HTTP status, a reason for metrics, a message."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message


def media_type(content_type: str | None) -> str:
    """`application/json; charset=utf-8` to `application/json`; a bad one is a 415."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media not in (PROTOBUF, JSON):
        raise BadRequest(
            415,
            semconv.REJECT_CONTENT_TYPE,
            f"unsupported content type {content_type!r}: use {PROTOBUF} or {JSON}",
        )
    return media


def decompress(body: bytes, encoding: str | None, max_bytes: int) -> bytes:
    """The body as sent, gunzipped when it says gzip; never more than `max_bytes`."""
    encoding = (encoding or "identity").strip().lower()
    if encoding == "identity":
        return body
    if encoding != "gzip":
        raise BadRequest(
            415, semconv.REJECT_CONTENT_TYPE, f"unsupported content encoding {encoding!r}"
        )
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise BadRequest(400, semconv.REJECT_MALFORMED, f"bad gzip body: {exc}") from None
    if len(data) > max_bytes:
        raise BadRequest(413, semconv.REJECT_TOO_LARGE, f"decompressed body over {max_bytes} bytes")
    if not inflater.eof:
        raise BadRequest(400, semconv.REJECT_MALFORMED, "bad gzip body: truncated")
    return data


def decode(body: bytes, media: str, max_spans: int | None = None) -> ExportTraceServiceRequest:
    """The request in `body` (already decompressed), of at most `max_spans` spans (a 413).

    The spans are counted before they are decoded: a body of millions of empty spans is
    refused before it costs the memory of millions of span objects.
    """
    if media == PROTOBUF:
        if max_spans is not None:
            _check_spans(count_spans(body, max_spans), max_spans)
        try:
            request: ExportTraceServiceRequest = ExportTraceServiceRequest.FromString(body)
            return request
        except DecodeError as exc:
            raise BadRequest(400, semconv.REJECT_MALFORMED, f"bad protobuf: {exc}") from None
    try:
        document = json.loads(body)
        if not isinstance(document, dict):
            raise ValueError("the body must be a JSON object")
        spans = _ids_to_base64(document)
        if max_spans is not None:
            _check_spans(spans, max_spans)
        parsed: ExportTraceServiceRequest = json_format.ParseDict(
            document, ExportTraceServiceRequest(), ignore_unknown_fields=True
        )
        return parsed
    except RecursionError:  # nested deeper than any OTLP document
        raise BadRequest(400, semconv.REJECT_MALFORMED, "bad OTLP/JSON: nested too deep") from None
    except (ValueError, TypeError, AttributeError, json_format.ParseError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BadRequest(400, semconv.REJECT_MALFORMED, f"bad OTLP/JSON: {message}") from None


_SPAN_IDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")
_LINK_IDS = ("traceId", "spanId", "trace_id", "span_id")


def _ids_to_base64(document: dict[str, Any]) -> int:
    """OTLP/JSON's hex ids rewritten in place as the base64 protobuf's JSON parser expects.

    Returns the number of spans.
    """
    count = 0
    for resource_spans in _list(document, "resourceSpans", "resource_spans"):
        for scope_spans in _list(resource_spans, "scopeSpans", "scope_spans"):
            for span in _list(scope_spans, "spans"):
                count += 1
                _convert(span, _SPAN_IDS)
                for link in _list(span, "links"):
                    _convert(link, _LINK_IDS)
    return count


def _check_spans(count: int, max_spans: int) -> None:
    if count > max_spans:
        message = f"too many spans: over {max_spans} per request"
        raise BadRequest(413, semconv.REJECT_TOO_LARGE, message)


def _list(container: Any, *keys: str) -> list[Any]:
    if not isinstance(container, dict):
        raise ValueError("expected a JSON object")
    for key in keys:
        if key in container:
            value = container[key]
            if not isinstance(value, list):
                raise ValueError(f"{key} must be an array")
            return value
    return []


def _convert(item: Any, keys: tuple[str, ...]) -> None:
    if not isinstance(item, dict):
        raise ValueError("a span or link must be a JSON object")
    for key in keys:
        value = item.get(key)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise ValueError(f"{key} must be a hex string")
        try:
            item[key] = base64.b64encode(binascii.unhexlify(value)).decode("ascii")
        except (binascii.Error, ValueError):
            raise ValueError(f"{key} {value[:40]!r} is not hex") from None


# A span takes at least two bytes on the wire (its tag and a zero length).
_MIN_SPAN_BYTES = 2


def count_spans(body: bytes, stop_after: int) -> int:
    """The spans an encoded request carries, counting no further than `stop_after + 1`.

    A walk over the wire format (ExportTraceServiceRequest.resource_spans, field 1, then
    scope_spans and spans, field 2 each) by offsets into `body`, building nothing: eight
    MiB of four million empty spans cost no memory here. A body too short to hold more
    spans is not walked. A body the walk cannot read is a 400 (`decode` would refuse it).
    """
    if len(body) < _MIN_SPAN_BYTES * (stop_after + 1):
        return 0
    count = 0
    try:
        for resource in _fields(body, 0, len(body), 1):
            for scope in _fields(body, *resource, 2):
                for _ in _fields(body, *scope, 2):
                    count += 1
                    if count > stop_after:
                        return count
    except IndexError:  # a varint running past the end
        raise BadRequest(400, semconv.REJECT_MALFORMED, "bad protobuf: truncated") from None
    return count


def _fields(data: bytes, at: int, end: int, number: int) -> Iterator[tuple[int, int]]:
    """Where the length-delimited fields numbered `number` lie in `data[at:end]`."""
    while at < end:
        key = data[at]  # one byte for field numbers up to 15
        if key < 0x80:
            at += 1
        else:
            key, at = _varint(data, at)
        wire_type = key & 7
        if wire_type == 2:
            size = data[at]  # a span's length: one byte up to 127, two up to 16 KiB
            if size < 0x80:
                at += 1
            elif data[at + 1] < 0x80:
                size, at = size & 0x7F | data[at + 1] << 7, at + 2
            else:
                size, at = _varint(data, at)
            if key >> 3 == number and at + size <= end:
                yield at, at + size
            at += size
        elif wire_type == 0:
            _, at = _varint(data, at)
        elif wire_type == 1:
            at += 8
        elif wire_type == 5:
            at += 4
        else:  # groups (3, 4) are in no OTLP message; 6 and 7 are not wire types
            raise BadRequest(400, semconv.REJECT_MALFORMED, f"bad protobuf: wire type {wire_type}")
        if at > end:
            raise BadRequest(400, semconv.REJECT_MALFORMED, "bad protobuf: truncated")


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """The varint at `at` and the offset after it."""
    value = shift = 0
    for position in range(at, at + 10):
        byte = data[position]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position + 1
        shift += 7
    raise BadRequest(400, semconv.REJECT_MALFORMED, "bad protobuf: overlong varint")
