"""A real redis-server on 127.0.0.1 for tests: a free port, its own directory, AOF on.

Debian's `redis-server` (`make redis-server` installs it). Without it the tests that need
it skip with the reason, except under `CI=true`, where its absence fails them: CI must
exercise the Redis queue.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def require_redis_server() -> str:
    """The redis-server binary, or a skip (a failure under CI=true) saying how to get it."""
    binary = shutil.which("redis-server")
    if binary is None:
        reason = "redis-server is not installed (`make redis-server` installs Debian's)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI must run the Redis queue tests")
        pytest.skip(reason)
    return binary


class RedisServer:
    """One redis-server process; `restart` keeps its port and its append-only file."""

    def __init__(self, binary: str, directory: Path, appendfsync: str = "always") -> None:
        self.binary = binary
        self.directory = directory
        self.appendfsync = appendfsync
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--dir",
                str(self.directory),
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
                "--daemonize",
                "no",
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
            finally:
                client.close()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None
