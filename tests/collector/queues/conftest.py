"""Fixtures of the queue tests: a Redis server per test, started on demand.

The crash and scale-out tests (subprocesses, a minute or two) run in `make test-queues`,
which sets TRACEFACT_QUEUE_CRASH_TESTS=1; `make test` runs the contract tests only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.collector.queues import processes
from tests.collector.queues.redis_server import RedisServer, require_redis_server
from tests.fakes.otlp import OTLPReceiver, otlp_receiver

HEAVY = ["test_crash.py", "test_scale_out.py", "test_sigterm.py"]
collect_ignore = [] if os.environ.get("TRACEFACT_QUEUE_CRASH_TESTS") == "1" else HEAVY


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    directory = tmp_path / "redis"
    directory.mkdir()
    server = RedisServer(require_redis_server(), directory)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def upstream() -> Iterator[OTLPReceiver]:
    with otlp_receiver() as receiver:
        yield receiver


@pytest.fixture
def started() -> Iterator[list[processes.CollectorProcess]]:
    """Every process a test starts, stopped (or reaped, when killed) at its end."""
    running: list[processes.CollectorProcess] = []
    yield running
    processes.stop(running)
