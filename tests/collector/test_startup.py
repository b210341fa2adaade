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

from tests.collector.harness import CollectorProcess, running_collector, wait_until
from tests.collector.queues.processes import (
    config,
    send,
    sqlite_keys,
    start,
    stop,
    trace_requests,
)
from tests.collector.test_config import UPSTREAM, run
from tests.fakes.otlp import otlp_receiver
from tracefact.collector.config import ConfigError, parse


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


def test_a_summary_line_counts_what_metrics_counts(tmp_path: Path) -> None:
    with otlp_receiver() as upstream:
        settings = {
            **config(upstream.endpoint, 0),
            "logging": {"level": "info", "summary_seconds": 0.2},
        }
        settings["evaluation"] = {**settings["evaluation"], "evaluators": ["lexical"]}
        collector = start("collector", tmp_path / "tracefact.yaml", settings)
        try:
            send(collector, trace_requests(0x5A11, together=True))
            assert wait_until(lambda: summaries(collector, evaluated=1, forwarded=3))
        finally:
            stop([collector])
    last = collector.events("summary")[-1]
    assert last["received"] == 3 and last["dropped"] == 0 and last["queue_depth"] == 0
    assert "3 spans received, 3 forwarded, 1 evaluated" in last["message"]


def summaries(collector: CollectorProcess, **expected: int) -> bool:
    lines = collector.events("summary")
    return bool(lines) and all(lines[-1][k] == v for k, v in expected.items())


def test_a_worker_does_not_say_it_listens(tmp_path: Path) -> None:
    with otlp_receiver() as upstream:
        settings = {**config(upstream.endpoint, 0), **sqlite_keys(tmp_path)}
        worker = start("worker", tmp_path / "worker.yaml", settings)
        stop([worker])
    assert not worker.events("listening")
    [started] = worker.events("started")
    assert started["message"] == "consuming the queue" and "http" not in started


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            {"upstream": [{"endpoint": "http://127.0.0.1:9"}]},
            "upstream: unknown key 'upstream'; did you mean 'upstreams'?",
        ),
        (
            {"upstreams": [{"endpoint": "x"}], "evaluation": {"sampler": {"ratoi": 0.5}}},
            "evaluation.sampler.ratoi: unknown key 'ratoi'; did you mean 'ratio'?",
        ),
        (
            {
                "upstreams": [{"endpoint": "x"}],
                "evaluation": {"sinks": [{"type": "mlflow", "uri": "x"}]},
            },
            "evaluation.sinks.0.mlflow.uri: unknown key 'uri'",
        ),
    ],
)
def test_a_typo_is_named_before_what_it_leaves_missing(
    document: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        parse(document)
    assert str(raised.value).startswith(message), raised.value
