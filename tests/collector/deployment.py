"""collector/'s Dockerfile and compose.yaml read as a container runtime would, and run here.

Docker cannot run where tracefact is developed, so tests start what a container would:
the stage's ENTRYPOINT + CMD (or compose's `command`), with compose's environment and the
files the stage COPYs in, mapped back to the repository. Only addresses differ.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.collector.harness import CollectorProcess

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "collector"


def dockerfile_stages() -> dict[str, list[tuple[str, str]]]:
    """Each stage's instructions, (KEYWORD, arguments), continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", (DEPLOY / "Dockerfile").read_text(encoding="utf-8"))
    stages: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, arguments = line.partition(" ")
        if keyword.upper() == "FROM":
            current = stages.setdefault(arguments.split(" AS ")[-1].strip(), [])
        current.append((keyword.upper(), arguments.strip()))
    return stages


def instruction(stage: str, keyword: str) -> list[str]:
    """The exec-form (JSON array) arguments of the stage's last `keyword` instruction."""
    found = [arguments for kw, arguments in dockerfile_stages()[stage] if kw == keyword]
    assert found, f"no {keyword} in the {stage} stage"
    value: list[str] = json.loads(found[-1])
    return value


def copied_to(stage: str, path_in_image: str) -> Path:
    """The repository file the stage COPYs to `path_in_image`."""
    for keyword, arguments in dockerfile_stages()[stage]:
        if keyword == "COPY":
            *sources, target = arguments.split()
            if target == path_in_image and len(sources) == 1:
                return ROOT / sources[0]
    raise AssertionError(f"the {stage} stage copies nothing to {path_in_image}")


def compose_service(name: str) -> dict[str, Any]:
    document = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    service: dict[str, Any] = document["services"][name]
    return service


def container_command(service: str) -> list[str]:
    """What `docker compose up` runs for `service`: its stage's ENTRYPOINT + command."""
    spec = compose_service(service)
    stage = spec["build"]["target"]
    command = spec.get("command") or instruction(stage, "CMD")
    entrypoint = [a for kw, a in dockerfile_stages()[stage] if kw == "ENTRYPOINT"]
    return [*(json.loads(entrypoint[-1]) if entrypoint else []), *command]


def local_command(service: str) -> list[str]:
    """The container's command with this environment's executables and repository files."""
    stage = compose_service(service)["build"]["target"]
    command = container_command(service)
    scripts = Path(sys.executable).parent
    program = sys.executable if command[0] == "python" else str(scripts / command[0])
    paths = [str(copied_to(stage, a)) if a.startswith("/") else a for a in command[1:]]
    return [program, *paths]


@contextmanager
def compose_collector(upstream: str) -> Iterator[CollectorProcess]:
    """The `tracefact` service of compose.yaml on 127.0.0.1, forwarding to `upstream`.

    `upstream` stands for Phoenix: it also gets the results as span annotations.

    Its ports are free ones (0 through the variables the configuration reads); it is
    stopped with SIGTERM afterwards, as `docker stop` does.
    """
    env = {
        **os.environ,
        **compose_service("tracefact")["environment"],
        "TRACEFACT_UPSTREAM": upstream,
        "TRACEFACT_PHOENIX": upstream,
        "TRACEFACT_HOST": "127.0.0.1",
        "TRACEFACT_HTTP_PORT": "0",
        "TRACEFACT_GRPC_PORT": "0",
    }
    process = subprocess.Popen(
        local_command("tracefact"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    collector = CollectorProcess(process)  # reads its log as it comes
    try:
        collector.wait_listening()
        yield collector
    finally:
        if process.poll() is None:
            collector.terminate()
