"""Running a real backend for an end-to-end check.

Start it, wait until it answers, run the demo against it, stop it, and time each stage.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import httpx

ROOT = Path(__file__).resolve().parent.parent
VENVS = ROOT / ".e2e"
T = TypeVar("T")


class Stopwatch:
    """Stage timings, printed as they finish and again as a summary."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.stages: list[tuple[str, float]] = []

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        print(f"[{self.title}] {name} ...", flush=True)
        started = time.perf_counter()
        yield
        seconds = time.perf_counter() - started
        self.stages.append((name, seconds))
        print(f"[{self.title}] {name}: {seconds:.1f}s", flush=True)

    def report(self) -> None:
        stages = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in self.stages)
        total = sum(seconds for _, seconds in self.stages)
        print(f"[{self.title}] passed: {stages}; total {total:.1f}s", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running(
    command: list[str], env: dict[str, str], ready_url: str, log: Path, timeout: float = 180
) -> Iterator[None]:
    """Start a server in its own process group and wait for `ready_url` to answer 200.

    The group is stopped afterwards (SIGTERM, then SIGKILL).
    """
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + timeout
        while not _answers(ready_url):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{command[0]} did not become ready:\n{tail}")
            time.sleep(0.5)
        yield
    finally:
        _stop(process)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def run_demo(*args: str) -> None:
    """The offline RAG demo, with the project's own Python, sending to the backend."""
    command = [sys.executable, str(ROOT / "examples" / "rag_demo.py"), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    print(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "", flush=True)
    if done.returncode != 0:
        raise RuntimeError(f"demo failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def eventually(check: Callable[[], T], timeout: float = 60, interval: float = 1.0) -> T:
    """`check()` once it stops failing its assertions (backends store asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(interval)
