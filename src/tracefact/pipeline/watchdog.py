"""The watchdog: time limits enforced from outside the evaluation loop.

An evaluator can block the loop (`time.sleep` in `async evaluate`), ignore its
cancellation or never return; timers on that loop would then never fire. A thread
of its own checks the open jobs every tick: a span held past `max_hold_seconds` is
exported with status `timeout`; a job past its deadline is settled with status
`timeout` and its slot freed; and when the loop has not answered a heartbeat for a
while as well, the owner replaces it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from tracefact import semconv
from tracefact.pipeline.delivery import Delivery
from tracefact.pipeline.job import Job
from tracefact.pipeline.slots import Slots

logger = logging.getLogger("tracefact")

OVERRAN = "evaluation did not end by its deadline (the evaluator ignored cancellation)"


class Watchdog:
    """Checks holds and deadlines every `tick` seconds on a daemon thread.

    `stuck(now)` says whether the evaluation loop is unresponsive; `replace()` swaps in
    a fresh loop and settles the old one's jobs. `heartbeat()` pings the loop.
    """

    def __init__(
        self,
        slots: Slots,
        delivery: Delivery,
        max_hold_seconds: float,
        tick: float,
        stuck: Callable[[float], bool],
        replace: Callable[[], None],
        heartbeat: Callable[[], None],
    ) -> None:
        self._slots = slots
        self._delivery = delivery
        self._max_hold = max_hold_seconds
        self._tick = tick
        self._stuck = stuck
        self._replace = replace
        self._heartbeat = heartbeat
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def start(self) -> None:
        """Start watching (idempotent; the first job starts it)."""
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None and not self._stop.is_set():
                thread = threading.Thread(target=self._run, name="tracefact-watchdog", daemon=True)
                thread.start()
                self._thread = thread

    def stop(self) -> None:
        """Stop watching; returns at once (the thread ends within a tick)."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self._tick):
            try:
                self.check(time.monotonic())
            except Exception:  # the watchdog must outlive any bug in what it calls
                logger.exception("tracefact: watchdog check failed")

    def check(self, now: float) -> None:
        """One round: holds, deadlines, then the loop's health."""
        overdue: list[Job] = []
        for job in self._slots.unsettled():
            if not job.exported and now >= job.ended + self._max_hold:
                self._delivery.release_held(job)
            if job.deadline is not None and now >= job.deadline:
                overdue.append(job)
        if overdue and self._stuck(now):
            self._replace()
        for job in overdue:
            self._delivery.settle(job, semconv.STATUS_TIMEOUT, OVERRAN)
        self._heartbeat()
