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
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.descriptor_pb2 import FieldDescriptorProto, FileDescriptorProto
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracefact import semconv
from tracefact.collector.config import Limits

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
    """The body as sent, gunzipped when it says gzip; never more than `max_bytes`.

    A gzip body may hold several members one after the other (RFC 1952): they are all
    read, as `gzip.decompress` reads them. Anything after the last one is a 400.
    """
    encoding = (encoding or "identity").strip().lower()
    if encoding == "identity":
        return body
    if encoding != "gzip":
        raise BadRequest(
            415, semconv.REJECT_CONTENT_TYPE, f"unsupported content encoding {encoding!r}"
        )
    members: list[bytes] = []
    size = 0
    rest = body
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            data = inflater.decompress(rest, max_bytes + 1 - size)
        except zlib.error as exc:
            raise BadRequest(400, semconv.REJECT_MALFORMED, f"bad gzip body: {exc}") from None
        size += len(data)
        if size > max_bytes:
            message = f"decompressed body over {max_bytes} bytes"
            raise BadRequest(413, semconv.REJECT_TOO_LARGE, message)
        if not inflater.eof:
            raise BadRequest(400, semconv.REJECT_MALFORMED, "bad gzip body: truncated")
        members.append(data)
        rest = inflater.unused_data
        if not rest:
            return members[0] if len(members) == 1 else b"".join(members)


def decode(body: bytes, media: str, limits: Limits | None = None) -> ExportTraceServiceRequest:
    """The request in `body` (already decompressed), within `limits`' counts (a 413).

    Spans and items (attributes, events, links and the values of array and kvlist
    values) are counted before the protobuf message is built: a body of millions of
    empty spans or empty attributes is refused before it costs the memory of millions
    of objects, about 26 to 45 times the body.
    """
    if media == PROTOBUF:
        if limits is not None:
            census = count(body, limits.max_spans_per_request, limits.max_items_per_request)
            _check(census, limits)
        try:
            request: ExportTraceServiceRequest = ExportTraceServiceRequest.FromString(body)
            return request
        except DecodeError as exc:
            raise BadRequest(400, semconv.REJECT_MALFORMED, f"bad protobuf: {exc}") from None
    try:
        document = json.loads(body)
        if not isinstance(document, dict):
            raise ValueError("the body must be a JSON object")
        census = _ids_to_base64(document)
        if limits is not None:
            _check(census, limits)
        parsed: ExportTraceServiceRequest = json_format.ParseDict(
            document, ExportTraceServiceRequest(), ignore_unknown_fields=True
        )
        return parsed
    except RecursionError:  # nested deeper than any OTLP document
        raise BadRequest(400, semconv.REJECT_MALFORMED, "bad OTLP/JSON: nested too deep") from None
    except (
        ValueError,
        TypeError,
        AttributeError,
        OverflowError,  # a number too large for its field ("kind": 1e999)
        SystemError,  # protobuf's C parser on a lone surrogate in an enum's name
        json_format.ParseError,
    ) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BadRequest(400, semconv.REJECT_MALFORMED, f"bad OTLP/JSON: {message}") from None


# What one JSON value costs Python at most once parsed, beyond its text: measured on
# CPython 3.11 from 38 bytes (empty objects, empty arrays) and 74 (OTLP spans with
# ordinary attributes) to 100 (one-key objects whose keys all differ).
_JSON_VALUE_BYTES = 100


def json_cost(body: bytes) -> int:
    """The most `json.loads(body)` can allocate, in bytes, counted at C speed before it runs.

    Every value but the document itself is a key (one before each `:`) or an element of
    an array or object (one after each `,`, or its first): a body holds at most one value
    per `,`, `:`, `{` and `[`, plus one, counted inside strings too (more, never fewer).
    Each costs up to `_JSON_VALUE_BYTES`; the text is copied twice (the body decoded to a
    `str`, then sliced into strings), a byte a character for plain ASCII and up to four
    once any character (or backslash-u escape) may be wider than Latin-1.
    """
    values = 1 + sum(map(body.count, (b",", b":", b"{", b"[")))
    width = 1 if body.isascii() and b"\\u" not in body else 4
    return 2 * width * len(body) + _JSON_VALUE_BYTES * values


@dataclass(slots=True)
class Census:
    """What a request carries: spans, and items (attributes, events, links, nested values)."""

    spans: int = 0
    items: int = 0


def _check(census: Census, limits: Limits) -> None:
    if census.spans > limits.max_spans_per_request:
        message = f"too many spans: over {limits.max_spans_per_request} per request"
        raise BadRequest(413, semconv.REJECT_TOO_LARGE, message)
    if census.items > limits.max_items_per_request:
        message = (
            "too many attributes, events, links and values: "
            f"over {limits.max_items_per_request} per request"
        )
        raise BadRequest(413, semconv.REJECT_TOO_LARGE, message)


_SPAN_IDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")
_LINK_IDS = ("traceId", "spanId", "trace_id", "span_id")


def _ids_to_base64(document: dict[str, Any]) -> Census:
    """OTLP/JSON's hex ids rewritten in place as the base64 protobuf's JSON parser expects.

    Returns what the document carries, counted on the way.
    """
    census = Census()
    for resource_spans in _list(document, "resourceSpans", "resource_spans"):
        census.items += _json_attributes(_object(resource_spans, "resource"))
        for scope_spans in _list(resource_spans, "scopeSpans", "scope_spans"):
            census.items += _json_attributes(_object(scope_spans, "scope"))
            for span in _list(scope_spans, "spans"):
                census.spans += 1
                _convert(span, _SPAN_IDS)
                census.items += _json_attributes(span)
                for event in _list(span, "events"):
                    census.items += 1 + _json_attributes(event)
                for link in _list(span, "links"):
                    _convert(link, _LINK_IDS)
                    census.items += 1 + _json_attributes(link)
    return census


def _json_attributes(owner: Any) -> int:
    """The items in `owner`'s attributes: each key-value and the values nested in it."""
    return sum(1 + _json_values(_object(kv, "value")) for kv in _list(owner, "attributes"))


def _json_values(value: dict[str, Any]) -> int:
    """The items nested in an AnyValue: an array's values, a kvlist's key-values, and theirs."""
    array = _object(value, "arrayValue", "array_value")
    if array:
        return sum(1 + _json_values(_as_object(item)) for item in _list(array, "values"))
    kvlist = _object(value, "kvlistValue", "kvlist_value")
    return sum(1 + _json_values(_object(kv, "value")) for kv in _list(kvlist, "values"))


def _object(container: Any, *keys: str) -> dict[str, Any]:
    """The JSON object under the first of `keys` in `container`; {} for none (or null)."""
    container = _as_object(container)
    for key in keys:
        if container.get(key) is not None:
            return _as_object(container[key])
    return {}


def _as_object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return value


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


def _skeleton_class() -> Any:
    """ExportTraceServiceRequest down to its spans, each span and resource left as bytes.

    Parsed in C like the request itself, but building no span: what a request's spans
    and resources are, by size, for a few percent of decoding it.
    """
    bytes_, message = FieldDescriptorProto.TYPE_BYTES, FieldDescriptorProto.TYPE_MESSAGE
    one, many = FieldDescriptorProto.LABEL_OPTIONAL, FieldDescriptorProto.LABEL_REPEATED
    file = FileDescriptorProto(name="tracefact/skeleton.proto", package="tracefact.skeleton")
    file.syntax = "proto3"
    scope = file.message_type.add(name="ScopeSpans")
    scope.field.add(name="scope", number=1, type=bytes_, label=one)
    scope.field.add(name="spans", number=2, type=bytes_, label=many)
    resource = file.message_type.add(name="ResourceSpans")
    resource.field.add(name="resource", number=1, type=bytes_, label=one)
    resource.field.add(
        name="scope_spans",
        number=2,
        type=message,
        label=many,
        type_name=".tracefact.skeleton.ScopeSpans",
    )
    request = file.message_type.add(name="Request")
    request.field.add(
        name="resource_spans",
        number=1,
        type=message,
        label=many,
        type_name=".tracefact.skeleton.ResourceSpans",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tracefact.skeleton.Request"))


_SKELETON = _skeleton_class()


@dataclass(frozen=True, slots=True)
class Outline:
    """A protobuf request's spans, and the size of its largest span, resource or scope."""

    spans: int
    largest: int


def outline(body: bytes) -> Outline:
    """The spans `body` carries and its largest owner of attributes, by encoded size.

    An owner (span, resource, scope; a span's events and links are inside it) can break
    an attribute limit only if its encoding is longer than `max_attribute_value_bytes` or
    holds more than `max_attributes_per_span` attributes of two bytes or more: a request
    whose largest owner is shorter than both needs no look at its spans (`fits`).
    """
    try:
        skeleton = _SKELETON.FromString(body)
    except DecodeError as exc:
        raise BadRequest(400, semconv.REJECT_MALFORMED, f"bad protobuf: {exc}") from None
    spans = largest = 0
    for resource_spans in skeleton.resource_spans:
        largest = max(largest, len(resource_spans.resource))
        for scope_spans in resource_spans.scope_spans:
            sizes = scope_spans.spans
            spans += len(sizes)
            largest = max(largest, len(scope_spans.scope), max(map(len, sizes), default=0))
    return Outline(spans, largest)


def fits(outline: Outline, limits: Limits) -> bool:
    """Whether no attribute limit can apply to a request of this outline (see `outline`)."""
    most_attributes_bytes = 2 * limits.max_attributes_per_span + 1
    return outline.largest <= min(limits.max_attribute_value_bytes, most_attributes_bytes)


# A span or an item takes at least two bytes on the wire (its tag and a zero length).
_MIN_BYTES = 2

# Array and kvlist values nested deeper are refused, as the protobuf parser refuses them.
_MAX_DEPTH = 100


class _Over(Exception):
    """A count went past its limit: the walk stops there."""


def count(body: bytes, max_spans: int, max_items: int) -> Census:
    """What an encoded request carries, counting no further than one past either limit.

    A walk over the wire format (ExportTraceServiceRequest.resource_spans, field 1, then
    scope_spans and spans, field 2 each, and into their attribute lists) by offsets into
    `body`, building nothing: eight MiB of four million empty spans or attributes cost no
    memory here. Only what a body is long enough to hold past its limit is walked (two
    bytes each): a body too short for more items than `max_items` is walked down to its
    spans only, one too short for more spans too is not walked. A body the walk cannot
    read is a 400 (`decode` would refuse it).
    """
    walk = _Walk(body, max_spans, max_items)
    room = len(body) // _MIN_BYTES
    if room > max_spans or walk.counting_items:
        try:
            walk.request()
        except _Over:
            pass
        except IndexError:  # a varint running past the end
            raise BadRequest(400, semconv.REJECT_MALFORMED, "bad protobuf: truncated") from None
    return walk.census


class _Walk:
    """One request's walk; the field numbers are OTLP's trace and common messages'."""

    def __init__(self, body: bytes, max_spans: int, max_items: int) -> None:
        self.body = body
        self.max_spans = max_spans
        self.max_items = max_items
        self.counting_items = len(body) // _MIN_BYTES > max_items
        self.census = Census()

    def request(self) -> None:
        body, items = self.body, self.counting_items
        for number, at, end in _fields(body, 0, len(body)):
            if number != 1:  # ExportTraceServiceRequest.resource_spans
                continue
            for field, start, stop in _fields(body, at, end):
                if field == 1 and items:  # ResourceSpans.resource
                    self._attributes(start, stop, 1)
                elif field == 2:  # ResourceSpans.scope_spans
                    self._scope_spans(start, stop)

    def _scope_spans(self, at: int, end: int) -> None:
        census, items = self.census, self.counting_items
        for field, start, stop in _fields(self.body, at, end):
            if field == 1 and items:  # ScopeSpans.scope
                self._attributes(start, stop, 3)
            elif field == 2:  # ScopeSpans.spans
                census.spans += 1
                if census.spans > self.max_spans:
                    raise _Over
                if items:
                    self._span(start, stop)

    def _span(self, at: int, end: int) -> None:
        for field, start, stop in _fields(self.body, at, end):
            if field == 9:  # Span.attributes
                self._key_value(start, stop, 0)
            elif field == 11:  # Span.events, whose attributes are field 3
                self._item()
                self._attributes(start, stop, 3)
            elif field == 13:  # Span.links, whose attributes are field 4
                self._item()
                self._attributes(start, stop, 4)

    def _attributes(self, at: int, end: int, number: int) -> None:
        """The key-values of a resource, scope, event or link: field `number`."""
        for field, start, stop in _fields(self.body, at, end):
            if field == number:
                self._key_value(start, stop, 0)

    def _key_value(self, at: int, end: int, depth: int) -> None:
        self._item()
        for field, start, stop in _fields(self.body, at, end):
            if field == 2:  # KeyValue.value
                self._any_value(start, stop, depth)

    def _any_value(self, at: int, end: int, depth: int) -> None:
        """The values of an array (field 5) or kvlist (field 6), each field 1 of its own."""
        if depth > _MAX_DEPTH:
            raise BadRequest(400, semconv.REJECT_MALFORMED, "bad protobuf: nested too deep")
        body = self.body
        for field, start, stop in _fields(body, at, end):
            if field == 5:
                for number, value_at, value_end in _fields(body, start, stop):
                    if number == 1:
                        self._item()
                        self._any_value(value_at, value_end, depth + 1)
            elif field == 6:
                for number, value_at, value_end in _fields(body, start, stop):
                    if number == 1:
                        self._key_value(value_at, value_end, depth + 1)

    def _item(self) -> None:
        census = self.census
        census.items += 1
        if census.items > self.max_items:
            raise _Over


def _fields(data: bytes, at: int, end: int) -> Iterator[tuple[int, int, int]]:
    """The length-delimited fields in `data[at:end]`: each one's number, start and end."""
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
            if at + size <= end:
                yield key >> 3, at, at + size
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
