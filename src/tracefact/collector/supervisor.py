"""The collector's background loops, which cannot die unnoticed.

A loop that raises is logged, counted (`tracefact.collector.threads.restarted`) and
started again after a backoff that grows while it keeps failing: a fault that clears (a
locked file, a full disk, a bug hit by one request) costs a restart, never a collector
that answers 200 and forwards nothing. Only a fault that cannot clear (`QueueBroken`: the
queue's file is not a queue) is fatal: `/readyz` reports it at once and the process
exits non-zero (`service.run`), so that an orchestrator replaces it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from tracefact.collector.metrics import CollectorMetrics
from tracefact.collector.queue import QueueBroken

logger = logging.getLogger("tracefact.collector")

HEALTHY_SECONDS = 60.0
"""A loop that ran this long before failing starts its backoff again from the base."""


class Supervisor:
    """Runs loops on daemon threads; restarts a loop that raised, with backoff."""

    def __init__(
        self,
        metrics: CollectorMetrics,
        base_seconds: float = 0.1,
        max_seconds: float = 10.0,
    ) -> None:
        self.metrics = metrics
        self._base = base_seconds
        self._max = max_seconds
        self._fatal: str | None = None
        self.failed = threading.Event()
        """Set once a loop hit a fault that cannot clear (`fatal` says which)."""

    @property
    def fatal(self) -> str | None:
        """Why the collector cannot go on, or None."""
        return self._fatal

    def spawn(self, name: str, loop: Callable[[], None], stop: threading.Event) -> threading.Thread:
        """Start `loop` on a thread named `name`; it returns once `stop` is set."""
        thread = threading.Thread(target=self._run, args=(name, loop, stop), name=name, daemon=True)
        thread.start()
        return thread

    def _run(self, name: str, loop: Callable[[], None], stop: threading.Event) -> None:
        failures = 0
        while not stop.is_set():
            started = time.monotonic()
            try:
                loop()
                return
            except QueueBroken as exc:
                self._fatal = f"{name}: {exc}"
                logger.critical(
                    "fault that cannot clear; the collector stops",
                    extra={"event": "fatal", "loop": name, "error": str(exc)},
                )
                self.failed.set()
                return
            except Exception as exc:
                healthy = time.monotonic() - started >= HEALTHY_SECONDS
                failures = 1 if healthy else failures + 1
                delay = min(self._max, self._base * 2 ** min(failures - 1, 16))
                self.metrics.restarts.add(1, {"thread": name})
                logger.error(
                    "background thread failed; restarting",
                    exc_info=True,
                    extra={
                        "event": "thread_restart",
                        "loop": name,
                        "error": f"{type(exc).__name__}: {exc}",
                        "restart_in_seconds": delay,
                    },
                )
                stop.wait(delay)
