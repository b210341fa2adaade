"""The watchdog: what must happen even when the evaluation loop cannot run.

An evaluator can block the loop (`time.sleep` in `async evaluate`); nothing on that
loop runs then, its timers included. A thread of its own checks the open jobs every
tick: a span held past `max_hold_seconds` is released (it leaves with status `timeout`,
its verdict follows on a carrier span); and when a job is past its deadline and its
grace period while the loop has not answered a heartbeat for as long, the loop is
blocked: the owner replaces it. A loop that still runs ends overdue jobs itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from tracefact._clock import SYSTEM, Clock
from tracefact.pipeline.jobs import Job, Jobs

logger = logging.getLogger("tracefact")


class Watchdog:
    """Checks holds and the loop every `tick` seconds of `clock` on a daemon thread.

    `release(job)` lets a held span leave; `stuck(now)` says whether the loop stopped
    answering heartbeats, `replace()` swaps in a fresh one, `heartbeat()` pings it.
    A test's `ManualClock` makes each tick a step of the test's own.
    """

    def __init__(
        self,
        jobs: Jobs[Any],
        release: Callable[[Job[Any]], None],
        max_hold_seconds: float,
        grace_seconds: float,
        tick: float,
        stuck: Callable[[float], bool],
        replace: Callable[[], None],
        heartbeat: Callable[[], None],
        clock: Clock = SYSTEM,
    ) -> None:
        self._jobs = jobs
        self._release = release
        self._max_hold = max_hold_seconds
        self._grace = grace_seconds
        self._tick = tick
        self._stuck = stuck
        self._replace = replace
        self._heartbeat = heartbeat
        self._clock = clock
        self._stopping = threading.Condition()  # guards _stopped; notified by stop()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start watching (idempotent; the first job starts it)."""
        if self._thread is not None:
            return
        with self._stopping:
            if self._thread is None and not self._stopped:
                # The first check counts from now, not from when the thread first runs:
                # a clock that has moved on meanwhile must not push it back.
                first = self._clock.now() + self._tick
                thread = threading.Thread(
                    target=self._run, args=(first,), name="tracefact-watchdog", daemon=True
                )
                thread.start()
                self._thread = thread

    def stop(self) -> None:
        """Stop watching; returns at once (the thread ends without another check)."""
        with self._stopping:
            self._stopped = True
            self._stopping.notify_all()

    def _run(self, due: float) -> None:
        while True:
            with self._stopping:
                while not self._stopped and self._clock.now() < due:
                    self._clock.wait(self._stopping, due - self._clock.now())
                if self._stopped:
                    return
            try:
                self.check(self._clock.now())
            except Exception:  # the watchdog must outlive any bug in what it calls
                logger.exception("tracefact: watchdog check failed")
            due = self._clock.now() + self._tick

    def check(self, now: float) -> None:
        """One round: holds, then the loop's health."""
        overdue = False
        for job in self._jobs.unfinished():
            if job.held and now >= job.ended + self._max_hold:
                self._release(job)
            if job.deadline is not None and now >= job.deadline + self._grace:
                overdue = True
        if overdue and self._stuck(now):
            self._replace()
        self._heartbeat()
