"""Peak RSS of `tracefact collector` for adversarial OTLP bodies at the size limit.

Each case starts a fresh collector (evaluation off, an upstream that answers 200), warms
it with one small request, then posts the case's body once, or three times at once, and
prints the growth of the process's peak RSS (VmHWM) over the warmed baseline with the
statuses it answered. The bodies are 8 MiB of protobuf (`max_body_bytes`, the default):
empty spans; one span carrying empty attributes, events or links; one attribute whose
array value holds empty values; and OTLP/JSON of one span with empty attributes, or
with a field OTLP does not know holding arrays of empty arrays.

    .venv/bin/python scripts/collector_door_memory.py [words of case names...]
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml

MAX_BODY = 8 * 1024 * 1024
TRACEFACT = Path(sys.executable).parent / "tracefact"


def _delimited(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field: its tag, its length as a varint, the payload."""
    size, length = len(payload), bytearray()
    while True:
        byte, size = size & 0x7F, size >> 7
        length.append(byte | (0x80 if size else 0))
        if not size:
            return bytes([number << 3 | 2]) + bytes(length) + payload


def _request(span: bytes, *, spans: int = 1) -> bytes:
    """ExportTraceServiceRequest > ResourceSpans (1) > ScopeSpans (2) > Span (2)."""
    return _delimited(1, _delimited(2, _delimited(2, span) * spans))


def _fill(make: Callable[[int], bytes], item_bytes: int) -> bytes:
    """The body of `make(count)` with as many items of `item_bytes` as fit the limit."""
    return make((MAX_BODY - 256) // item_bytes)


def _array(count: int) -> bytes:
    values = b"\x0a\x00" * count  # ArrayValue.values (1): empty AnyValues
    value = _delimited(5, values)  # AnyValue.array_value (5)
    return _delimited(9, _delimited(2, value))  # Span.attributes (9) > KeyValue.value (2)


def _json_attributes(count: int) -> bytes:
    head = b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","attributes":['
    return head + b",".join([b"{}"] * count) + b"]}]}]}]}"


def _json_unknown_field(count: int) -> bytes:
    head = b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","x":['
    return head + b",".join([b"[[]]"] * count) + b"]}]}]}]}"


CASES: dict[str, tuple[bytes, str]] = {
    "empty spans": (_fill(lambda n: _delimited(1, _delimited(2, b"\x12\x00" * n)), 2), "p"),
    "one span, empty attributes": (_fill(lambda n: _request(b"\x4a\x00" * n), 2), "p"),
    "one span, empty events": (_fill(lambda n: _request(b"\x5a\x00" * n), 2), "p"),
    "one span, empty links": (_fill(lambda n: _request(b"\x6a\x00" * n), 2), "p"),
    "one attribute, array of empty values": (_fill(lambda n: _request(_array(n)), 2), "p"),
    "OTLP/JSON, one span, empty attributes": (_fill(_json_attributes, 3), "j"),
    "OTLP/JSON, one span, an unknown field of arrays": (_fill(_json_unknown_field, 5), "j"),
    # Within the default limits, and at both: accepted, and the most a request costs.
    "100,000 empty spans, one with 500,000 empty links": (
        _delimited(1, _delimited(2, _delimited(2, b"\x6a\x00" * 500_000) + b"\x12\x00" * 99_999)),
        "p",
    ),
}
CONTENT_TYPES = {"p": "application/x-protobuf", "j": "application/json"}


class _Upstream(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@contextmanager
def collector(upstream: str, directory: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    settings = {
        "receivers": {"http": {"host": "127.0.0.1", "port": 0}, "grpc": None},
        "upstreams": [{"endpoint": upstream}],
        "evaluation": {"enabled": False},
        "limits": {"max_body_bytes": MAX_BODY},
    }
    path = directory / "collector.yaml"
    path.write_text(yaml.safe_dump(settings))
    process = subprocess.Popen(
        [str(TRACEFACT), "collector", "--config", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:
        event = json.loads(line)
        if event.get("event") == "listening":
            break
    threading.Thread(target=process.stderr.read, daemon=True).start()
    try:
        yield process, f"http://127.0.0.1:{event['http']}/v1/traces"
    finally:
        process.terminate()
        process.wait(30)


def peak_rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmHWM:\s+(\d+) kB", status)
    assert match is not None
    return int(match.group(1)) / 1024


def measure(upstream: str, directory: Path, body: bytes, media: str, clients: int) -> str:
    with collector(upstream, directory) as (process, url):
        headers = {"Content-Type": CONTENT_TYPES[media]}
        warm = _request(b"\x2a\x01x")  # one span named "x"
        httpx.post(url, content=warm, headers={"Content-Type": CONTENT_TYPES["p"]})
        baseline = peak_rss_mib(process.pid)

        def post(_: int) -> int:
            return httpx.post(url, content=body, headers=headers, timeout=120).status_code

        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            statuses = sorted(pool.map(post, range(clients)))
        growth = peak_rss_mib(process.pid) - baseline
    return f"{growth:.0f} MiB over {baseline:.0f} ({', '.join(map(str, statuses))})"


def main(only: list[str]) -> None:
    """Every case, or those whose name contains one of `only`."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    upstream = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    print(f"| body ({MAX_BODY >> 20} MiB) | one | three at once |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory() as directory:
        for name, (body, media) in CASES.items():
            if only and not any(word in name for word in only):
                continue
            assert len(body) <= MAX_BODY, name
            one = measure(upstream, Path(directory), body, media, 1)
            three = measure(upstream, Path(directory), body, media, 3)
            print(f"| {name} | {one} | {three} |", flush=True)
    server.shutdown()


if __name__ == "__main__":
    os.environ.setdefault("TRACEFACT_LOG_LEVEL", "warning")
    main(sys.argv[1:])
