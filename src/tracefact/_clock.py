"""Time for tracefact's threads: the one thing tests replace to order events without sleeps.

Every thread that waits for a deadline or a tick (the export stage and every batching
sender, the pipeline's watchdog, the evaluation loop's heartbeat) reads `now()` and
waits through `wait()`. `SystemClock` is real time. `ManualClock` stands still until a
test calls `advance`, which wakes every waiter so it looks at the new time: a test
says "0.1 s later" and sees what that causes, however slow the machine.
"""

from __future__ import annotations

import threading
import time
import weakref


class Clock:
    """Monotonic seconds, and waits on a condition that end at a time of this clock."""

    def now(self) -> float:
        return time.monotonic()

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        """Wait on `condition` (held by the caller) for a notify or `timeout` seconds."""
        condition.wait(None if timeout is None else max(0.0, timeout))


SYSTEM = Clock()
"""Real time: the default everywhere."""


class ManualClock(Clock):
    """Time that moves only when `advance` is called; waiters wake at each step.

    A wait with a timeout does not end by itself: it ends on its condition's notify, or
    when `advance` moves the clock (the waiter then checks the time again, as it would
    after a real timeout).
    """

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()  # guards _now and the set of waiting conditions
        self._waiting: weakref.WeakSet[threading.Condition] = weakref.WeakSet()

    def now(self) -> float:
        with self._lock:
            return self._now

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        if timeout is not None and timeout <= 0:
            return
        with self._lock:
            self._waiting.add(condition)
        condition.wait()

    def advance(self, seconds: float) -> None:
        """Move time on by `seconds` and wake every waiter to look at it."""
        with self._lock:
            self._now += seconds
            waiting = list(self._waiting)
        for condition in waiting:
            with condition:
                condition.notify_all()
