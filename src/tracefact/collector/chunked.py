"""Reading a `Transfer-Encoding: chunked` request body within the body limit.

Exporters that stream (or proxies that re-chunk) send no Content-Length. Each chunk's
size is read before the chunk itself, so a body over the limit is refused with 413 as
soon as a chunk header would pass it, and never held in memory.
"""

from __future__ import annotations

import asyncio

from tracefact import semconv
from tracefact.collector.decode import BadRequest

MAX_LINE = 4096
"""Bytes a chunk-size line (with its extensions) or a trailer line may take."""
MAX_TRAILERS = 64
"""Trailer lines after the last chunk; more is a malformed request."""
_HEX = b"0123456789abcdefABCDEF"


async def read_chunked(stream: asyncio.StreamReader, limit: int) -> bytes:
    """The decoded body; raises `BadRequest` (413 past `limit`, 400 if malformed)."""
    reader = _Reader(stream, 2 * limit + MAX_LINE, limit)
    body = bytearray()
    while size := _chunk_size(await reader.line()):
        if len(body) + size > limit:
            raise _too_large(limit)
        body += await reader.read(size)
        if await reader.line() != b"":
            raise _malformed("chunk not the size it said")
    for _ in range(MAX_TRAILERS):
        if await reader.line() == b"":  # trailers are not used by OTLP: skipped
            return bytes(body)
    raise _malformed("too many trailer lines")


class _Reader:
    """The stream, counting what is read against the wire bound."""

    def __init__(self, stream: asyncio.StreamReader, wire_limit: int, limit: int) -> None:
        self._stream = stream
        self._left = wire_limit
        self._limit = limit

    async def read(self, size: int) -> bytes:
        try:
            return self._count(await self._stream.readexactly(size))
        except asyncio.IncompleteReadError:
            raise _malformed("chunk shorter than its size") from None

    async def line(self) -> bytes:
        """One CRLF-terminated line without its terminator; a missing one is malformed."""
        try:
            line = await self._stream.readuntil(b"\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            raise _malformed("chunked body cut short or line too long") from None
        if len(line) > MAX_LINE + 1:
            raise _malformed("chunked body cut short or line too long")
        return self._count(line).rstrip(b"\r\n")

    def _count(self, data: bytes) -> bytes:
        self._left -= len(data)
        if self._left < 0:
            raise _too_large(self._limit)
        return data


def _chunk_size(line: bytes) -> int:
    text = line.split(b";", 1)[0].strip()  # extensions after ";" are ignored
    if not text or text.strip(_HEX):  # int() alone would take "-1", "0x1", "1_0"
        raise _malformed(f"bad chunk size {text[:20]!r}")
    return int(text, 16)


def _too_large(limit: int) -> BadRequest:
    return BadRequest(413, semconv.REJECT_TOO_LARGE, f"body over {limit} bytes")


def _malformed(message: str) -> BadRequest:
    return BadRequest(400, semconv.REJECT_MALFORMED, f"bad chunked body: {message}")
