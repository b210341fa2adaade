"""`tracefact monitor` in a real terminal: tmux runs it, types at it and reads its screen.

Skipped when tmux is absent (``make terminal-deps`` installs it), except under CI=true,
where a missing tmux is a failure rather than a silently untested view.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.monitor.spans import evaluated, spans_file

TMUX = shutil.which("tmux")
if TMUX is None:
    if os.environ.get("CI") == "true":
        pytest.fail("tmux is missing under CI=true: run `make terminal-deps`", pytrace=False)
    pytest.skip("tmux is not installed (make terminal-deps installs it)", allow_module_level=True)

TRACEFACT = str(Path(sys.executable).with_name("tracefact"))
T0 = time.time() - 60
APP = """
import sys, time, tracefact
from tracefact.evaluators.lexical import LexicalOverlap
port = int(sys.argv[1])
tracefact.configure(exporter="none", evaluators=[LexicalOverlap()], prometheus_port=port)
@tracefact.retriever
def search(q): return ["Paris is the capital of France."]
i = 0
while True:
    with tracefact.span("generate", kind="llm", model="live-model") as span:
        search("capital")
        answer = "Berlin is a moon of Jupiter." if i % 4 == 0 else "Paris is the capital of France."
        span.record(input="What is the capital of France?", output=answer)
    i += 1
    time.sleep(0.01)
"""


class Terminal:
    """One tmux server of our own (its own socket), a window of 120 by 40."""

    def __init__(self) -> None:
        self.socket = f"tracefact-test-{uuid.uuid4().hex[:8]}"

    def tmux(self, *args: str) -> str:
        assert TMUX is not None
        ran = subprocess.run(
            [TMUX, "-L", self.socket, *args], capture_output=True, text=True, timeout=30
        )
        assert ran.returncode == 0, ran.stderr
        return ran.stdout

    def start(self, command: str) -> None:
        """`command` in a new session; its exit code is printed when it ends."""
        # Without the test process's COLUMNS and LINES, which rich would take over the window's.
        shell = f"env -u COLUMNS -u LINES {command}; echo monitor-exit=$?; sleep 60"
        self.tmux("new-session", "-d", "-x", "120", "-y", "40", "-s", "main", shell)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "main")

    def wait_for(self, found: Callable[[str], bool], what: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.screen()
            if found(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"never saw {what}; the screen:\n{self.screen()}")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "main", *keys)

    def close(self) -> None:
        subprocess.run([TMUX or "tmux", "-L", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    opened = Terminal()
    yield opened
    opened.close()


def test_follows_a_growing_spans_file_and_quits_on_q(terminal: Terminal, tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    with spans_file(path) as writer:
        for i in range(40):
            writer.span("llm", evaluated("hallucinated" if i < 10 else "factual"), T0 + i)
        terminal.start(f"{TRACEFACT} monitor --spans {path} --interval 0.3")
        screen = terminal.wait_for(lambda s: "model=m1" in s, "the first group")
        assert "25.0%" in screen and "tracefact monitor" in screen and "q to quit" in screen
        assert "●" in screen  # the band: 120 columns have room for it
        for i in range(30):  # a second model shows up while the view runs
            writer.span("llm", evaluated("hallucinated", model="m2"), T0 + 40 + i)
        screen = terminal.wait_for(
            lambda s: "model=m2" in s and "ok 70" in s, "all of the group added later"
        )
    assert "100.0%" in screen
    terminal.keys("q")
    screen = terminal.wait_for(lambda s: "monitor-exit=" in s, "the monitor to exit")
    assert "monitor-exit=0" in screen
    assert "Traceback" not in screen


def test_scrapes_a_live_app_and_stops_on_ctrl_c(terminal: Terminal, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = tmp_path / "app.py"
    script.write_text(APP)
    log = tmp_path / "app.log"
    with log.open("w") as errors:
        app = subprocess.Popen([sys.executable, str(script), str(port)], stderr=errors)
    try:
        terminal.start(f"{TRACEFACT} monitor --prometheus http://127.0.0.1:{port} --interval 0.3")
        screen = terminal.wait_for(
            lambda s: "model=live-model" in s and "judged/s" in s,
            "the app's rate and throughput",
        )
        assert log.read_text() == ""
        assert "queue depth" in screen and "evaluation full 0" in screen
        terminal.keys("C-c")
        screen = terminal.wait_for(lambda s: "monitor-exit=" in s, "the monitor to exit")
        assert "monitor-exit=0" in screen and "Traceback" not in screen
    finally:
        app.terminate()
        app.wait(timeout=10)
