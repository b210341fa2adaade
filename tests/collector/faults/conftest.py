"""Fixtures of the fault tests: the queue tests' upstream, Redis server and processes.

The subprocess tests (`test_collector_faults.py`, a minute or two) run in
`make test-faults`, which sets TRACEFACT_FAULT_TESTS=1; `make test` runs the in-process
ones only.
"""

from __future__ import annotations

import os

from tests.collector.queues.conftest import redis_server, started, upstream

__all__ = ["redis_server", "started", "upstream"]

HEAVY = ["test_collector_faults.py"]
collect_ignore = [] if os.environ.get("TRACEFACT_FAULT_TESTS") == "1" else HEAVY
