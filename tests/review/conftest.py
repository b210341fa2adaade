"""A fake Phoenix on 127.0.0.1 for the review tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from tests.review.fake_phoenix import FakePhoenix


@pytest.fixture
def fake_phoenix() -> Iterator[str]:
    """The fake's base URL; what it holds starts empty."""
    FakePhoenix.annotations, FakePhoenix.configs, FakePhoenix.queries = [], [], []
    FakePhoenix.assigned = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakePhoenix)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
