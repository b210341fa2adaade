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
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
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
            _check_spans(count_spans(body), max_spans)
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
        message = f"{count} spans, over {max_spans} per request"
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


def _skeleton() -> Any:
    """`ExportTraceServiceRequest` with each span left as its encoded bytes.

    Parsing it counts a request's spans without building them: four million empty spans
    (8 MiB) cost about 16 bytes each here, against some 170 decoded.
    """
    file = descriptor_pb2.FileDescriptorProto(name="tracefact_skeleton.proto", package="tfs")
    for name, field, type_name in (
        ("Request", "resource_spans", ".tfs.Resource"),
        ("Resource", "scope_spans", ".tfs.Scope"),
    ):
        message = file.message_type.add(name=name)
        message.field.add(
            name=field,
            number=1 if name == "Request" else 2,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
            type_name=type_name,
        )
    file.message_type.add(name="Scope").field.add(
        name="spans",
        number=2,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tfs.Request"))


_SKELETON = _skeleton()


def count_spans(body: bytes) -> int:
    """The spans an encoded request carries, counted before it is decoded (see `_skeleton`).

    A body that is not protobuf counts 0 here; `decode` says what is wrong with it.
    """
    try:
        request = _SKELETON.FromString(body)
    except DecodeError:
        return 0
    return sum(
        len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans
    )
