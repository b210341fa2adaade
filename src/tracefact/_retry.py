"""When to try again and how long to wait: one definition for every client in tracefact.

The pipeline retries evaluators, the result sinks retry their backend; both ask the same
questions here. A transient failure is one that may succeed later unchanged: a lost
connection, a timeout, HTTP 408, 425, 429 or any 5xx. Waits grow exponentially with
full jitter (AWS's "full jitter" backoff), so clients that failed together do not retry
together, and a server's Retry-After is honoured when it gives one.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from tracefact.evaluators.base import EvaluationError

TRANSIENT_STATUSES = frozenset({408, 425, 429})
"""Client-side statuses worth retrying; every 5xx is transient as well."""


def is_transient_status(status: int) -> bool:
    """True for 408, 425, 429 and every 5xx."""
    return status in TRANSIENT_STATUSES or 500 <= status <= 599


def is_transient(error: BaseException) -> bool:
    """True when the same request may succeed later: rate limits, 5xx, lost connections."""
    if isinstance(error, EvaluationError):
        return error.transient
    return isinstance(error, (ConnectionError, TimeoutError, httpx.TransportError))


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from a numeric Retry-After header; absent, dates and garbage give None."""
    value = headers.get("retry-after") if headers else None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:  # an HTTP date: the caller's own backoff decides
        return None


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter, capped at `max_seconds`.

    Attributes:
        base_seconds: the cap of the first wait; each retry doubles it.
        max_seconds: no wait is longer, whatever the attempt or the server's Retry-After.
    """

    base_seconds: float = 0.5
    max_seconds: float = 10.0

    def __post_init__(self) -> None:
        if self.base_seconds < 0 or self.max_seconds < 0:
            raise ValueError("backoff seconds must not be negative")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `attempt + 1` (attempt counts from 0)."""
        if retry_after is not None:
            return min(retry_after, self.max_seconds)
        cap = min(self.max_seconds, self.base_seconds * 2**attempt)
        return random.uniform(0.0, cap)
