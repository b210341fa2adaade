"""What `tracefact collector` says as it starts: where it listens, and what to change.

Real subprocesses of the command: a port another process holds is one line naming the
setting (no traceback), and listening beyond this machine without a token is a warning.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.collector.harness import running_collector
from tests.collector.test_config import UPSTREAM, run
from tracefact.collector.config import parse


@contextmanager
def taken_port() -> Iterator[int]:
    """A port of 127.0.0.1 another process listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_receivers_and_metrics_listen_on_loopback_by_default() -> None:
    config = parse({"upstreams": [{"endpoint": "http://127.0.0.1:9"}]})
    assert config.receivers.http is not None and config.receivers.grpc is not None
    hosts = {config.receivers.http.host, config.receivers.grpc.host, config.metrics.host}
    assert hosts == {"127.0.0.1"}


@pytest.mark.parametrize("receiver", ["http", "grpc"])
def test_a_port_in_use_is_one_line_naming_the_setting(tmp_path: Path, receiver: str) -> None:
    other = "grpc" if receiver == "http" else "http"
    with taken_port() as port:
        path = tmp_path / "tracefact.yaml"
        path.write_text(
            UPSTREAM
            + f"receivers:\n  {receiver}: {{host: 127.0.0.1, port: {port}}}\n"
            + f"  {other}: null\n"
            + "evaluation: {evaluators: [lexical]}\n"
            + "logging: {level: warning}\n"
        )
        result = run(path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"set receivers.{receiver}.port" in lines[0] and f"127.0.0.1:{port}" in lines[0]


def test_listening_beyond_loopback_without_a_token_warns(tmp_path: Path) -> None:
    settings = {
        "receivers": {"http": {"host": "0.0.0.0", "port": 0}, "grpc": None},
        "upstreams": [{"endpoint": "http://127.0.0.1:9"}],
        "evaluation": {"evaluators": ["lexical"]},
    }
    with running_collector(tmp_path / "open.yaml", settings) as collector:
        pass
    warned = collector.events("no_token")
    assert len(warned) == 1 and "auth.bearer_token" in warned[0]["message"]
    settings["auth"] = {"bearer_token": "secret"}
    with running_collector(tmp_path / "token.yaml", settings) as collector:
        pass
    assert not collector.events("no_token")
