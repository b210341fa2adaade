"""Waiting for an outcome the test can observe, never for a length of time.

A test that orders events waits for the event itself (a span exported, a metric counted,
a log line written); the bound only keeps a broken build from hanging. What depends on
time itself takes a `tracefact._clock.ManualClock` instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(check: Callable[[], object], seconds: float = 20.0, interval: float = 0.01) -> bool:
    """True once `check()` is true; False if it still is not after `seconds` (a hang guard)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)
    return bool(check())
