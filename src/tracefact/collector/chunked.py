"""Reading a `Transfer-Encoding: chunked` request body within the body limit.

Exporters that stream (or proxies that re-chunk) send no Content-Length. Each chunk's
size is read before the chunk itself, so a body over the limit is refused with 413 as
soon as a chunk header would pass it, and never held in memory.
"""

from __future__ import annotations

from io import BufferedIOBase

from tracefact import semconv
from tracefact.collector.decode import BadRequest

MAX_LINE = 4096
"""Bytes a chunk-size line (with its extensions) or a trailer line may take."""
MAX_TRAILERS = 64
"""Trailer lines after the last chunk; more is a malformed request."""
_HEX = b"0123456789abcdefABCDEF"


def read_chunked(stream: BufferedIOBase, limit: int) -> bytes:
    """The decoded body; raises `BadRequest` (413 past `limit`, 400 if malformed)."""
    body = bytearray()
    while size := _chunk_size(stream):
        if len(body) + size > limit:
            raise BadRequest(413, semconv.REJECT_TOO_LARGE, f"body over {limit} bytes")
        chunk = stream.read(size)
        if len(chunk) < size or _line(stream) != b"":
            raise _malformed("chunk shorter than its size")
        body += chunk
    for _ in range(MAX_TRAILERS):
        if _line(stream) == b"":  # trailers are not used by OTLP: skipped
            return bytes(body)
    raise _malformed("too many trailer lines")


def _chunk_size(stream: BufferedIOBase) -> int:
    text = _line(stream).split(b";", 1)[0].strip()  # extensions after ";" are ignored
    if not text or text.strip(_HEX):  # int() alone would take "-1", "0x1", "1_0"
        raise _malformed(f"bad chunk size {text[:20]!r}")
    return int(text, 16)


def _line(stream: BufferedIOBase) -> bytes:
    """One CRLF-terminated line without its terminator; a missing one is malformed."""
    line = stream.readline(MAX_LINE + 1)
    if not line.endswith(b"\n"):
        raise _malformed("chunked body cut short or line too long")
    return line.rstrip(b"\r\n")


def _malformed(message: str) -> BadRequest:
    return BadRequest(400, semconv.REJECT_MALFORMED, f"bad chunked body: {message}")
