"""`tracefact worker` refuses what it cannot do, in one line naming the key, exit 2."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.collector.harness import TRACEFACT


def test_a_worker_needs_a_durable_queue(tmp_path: Path) -> None:
    path = tmp_path / "tracefact.yaml"
    path.write_text("upstreams:\n  - endpoint: http://127.0.0.1:9\n")  # queue: memory
    result = subprocess.run(
        [str(TRACEFACT), "worker", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "tracefact worker: queue: a worker needs a durable queue (sqlite or redis)"
    )
