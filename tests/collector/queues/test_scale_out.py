"""collector/compose.scale.yaml, run as compose would: two collectors and a worker on Redis.

Docker cannot run here, so the services' commands and environment are read from the
compose file and started as subprocesses against a real Redis and a local upstream; only
addresses (ports 0, 127.0.0.1) differ. Run by `make test-queues`.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.collector.harness import TRACEFACT, CollectorProcess, wait_until
from tests.collector.queues import processes
from tests.collector.queues.processes import arrivals, llm_statuses, send, trace_requests
from tests.collector.queues.redis_server import RedisServer
from tests.fakes.otlp import otlp_receiver
from tracefact.collector.config import load

DEPLOY = processes.ROOT / "collector"
COMPOSE = yaml.safe_load((DEPLOY / "compose.scale.yaml").read_text(encoding="utf-8"))
LOCAL = {
    "TRACEFACT_HOST": "127.0.0.1",
    "TRACEFACT_HTTP_PORT": "0",
    "TRACEFACT_GRPC_PORT": "0",
    "TRACEFACT_METRICS_PORT": "0",
}


def service(name: str) -> tuple[list[str], dict[str, str], Path]:
    """The service's command, environment and configuration file (its volume's source)."""
    spec: dict[str, Any] = COMPOSE["services"][name]
    [volume] = spec["volumes"]
    source, target, _ = volume.split(":")
    command = [str(DEPLOY / source) if a == target else a for a in spec["command"]]
    return command, {k: str(v) for k, v in spec["environment"].items()}, DEPLOY / source


def start(name: str, redis_url: str, upstream: str) -> CollectorProcess:
    command, environment, _ = service(name)
    environment |= {**LOCAL, "TRACEFACT_REDIS_URL": redis_url, "TRACEFACT_UPSTREAM": upstream}
    process = subprocess.Popen(
        [str(TRACEFACT), *command],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=processes.ROOT,
        env={**os.environ, **environment},
    )
    started = CollectorProcess(process)
    started.wait_listening()
    return started


def test_compose_services_read_the_scale_configuration_as_intended() -> None:
    command, environment, path = service("collector-1")
    assert command[:2] == ["collector", "--config"]
    assert load(path, environment).redis is not None
    assert load(path, environment).redis.consume is False  # type: ignore[union-attr]
    worker_command, worker_environment, _ = service("worker")
    assert worker_command[:2] == ["worker", "--config"]
    worker = load(path, worker_environment)
    assert worker.queue == "redis" and worker.redis is not None and worker.redis.consume
    assert COMPOSE["services"]["worker"]["deploy"]["replicas"] == 3


def test_two_collectors_and_a_worker_from_the_compose_file_evaluate_every_trace(
    redis_server: RedisServer, started: list[CollectorProcess]
) -> None:
    traces = range(1, 9)
    with otlp_receiver() as upstream:
        collectors = [
            start(n, redis_server.url, upstream.endpoint) for n in ("collector-1", "collector-2")
        ]
        started += collectors
        started.append(start("worker", redis_server.url, upstream.endpoint))
        for trace in traces:  # the LLM span to one collector, its retriever span to the other
            llm, retriever = trace_requests(trace, together=False)
            send(collectors[trace % 2], [llm])
            send(collectors[(trace + 1) % 2], [retriever])
        assert wait_until(lambda: len(arrivals(upstream)) == 3 * len(traces), timeout=120)
        assert set(arrivals(upstream).values()) == {1}
        statuses = llm_statuses(upstream)
        assert {s.split(":")[0] for values in statuses.values() for s in values} == {"ok"}
