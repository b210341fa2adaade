"""Fixtures of the queue tests: a Redis server per test, started on demand."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.collector.queues.redis_server import RedisServer, require_redis_server


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    directory = tmp_path / "redis"
    directory.mkdir()
    server = RedisServer(require_redis_server(), directory)
    server.start()
    yield server
    server.stop()
