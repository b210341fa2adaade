"""When to try again and how long to wait: one definition for every client in tracefact.

The pipeline retries evaluators; the batching sender (`tracefact._batching`) retries the
export stage's, the result sinks' and the collector's upstream calls; evaluator clients
classify their failures. All ask the same questions here. A transient failure is one
that may succeed later unchanged: a lost connection, a timeout, HTTP 408, 425, 429 or any
5xx. Waits grow exponentially with full jitter (AWS's "full jitter" backoff), so clients
that failed together do not retry together, and a server's Retry-After is honoured when
it gives one. A leaf: it imports nothing of tracefact but the error tree.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import httpx

from tracefact.errors import TracefactError

TRANSIENT_STATUSES = frozenset({408, 425, 429})
"""Client-side statuses worth retrying; every 5xx is transient as well."""


def is_transient_status(status: int) -> bool:
    """True for 408, 425, 429 and every 5xx."""
    return status in TRANSIENT_STATUSES or 500 <= status <= 599


def is_transient(error: BaseException) -> bool:
    """True when the same request may succeed later: rate limits, 5xx, lost connections."""
    if isinstance(error, TracefactError):
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


class Attempt(NamedTuple):
    """One call to a server: done, or why not and whether trying again may help."""

    ok: bool
    transient: bool = False
    error: str = ""
    retry_after: float | None = None
    rejected: int = 0
    """Accepted, but the server says it dropped this many items (OTLP's partial success)."""


def attempt_of(response: httpx.Response, *, retry_not_found: bool = False) -> Attempt:
    """An HTTP response as an `Attempt`.

    2xx is done; a transient status (and 404 where `retry_not_found`) is worth another
    try, with the server's Retry-After; the rest are final.
    """
    if response.is_success:
        return Attempt(True)
    error = f"HTTP {response.status_code} from {response.request.url}: {response.text[:200]}"
    status = response.status_code
    if is_transient_status(status) or (status == 404 and retry_not_found):
        return Attempt(False, True, error, retry_after_seconds(response.headers))
    return Attempt(False, False, error)


def failed_attempt(error: BaseException) -> Attempt:
    """A call that raised: transient when `is_transient` says so."""
    return Attempt(False, is_transient(error), f"{type(error).__name__}: {error}")


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


@dataclass(frozen=True)
class Retries:
    """Whether and when to try a failed call again: the one retry rule of tracefact.

    Attributes:
        max_retries: retries after the first try; None: until the caller's deadline.
        backoff: the wait before each retry.
    """

    max_retries: int | None = 2
    backoff: Backoff = field(default_factory=Backoff)

    def __post_init__(self) -> None:
        if self.max_retries is not None and self.max_retries < 0:
            raise ValueError("max_retries must not be negative")

    def delay(
        self,
        retries: int,
        transient: bool,
        retry_after: float | None = None,
        remaining: float | None = None,
    ) -> float | None:
        """The wait before the next try after `retries` retries, or None: give up.

        Permanent failures and spent retries give up. With `remaining` seconds to a
        deadline, the wait leaves room for one more try before it (half of what is left).
        """
        if not transient or (self.max_retries is not None and retries >= self.max_retries):
            return None
        delay = self.backoff.delay(retries, retry_after)
        if remaining is not None:
            if remaining <= 0:
                return None
            delay = min(delay, remaining / 2)
        return delay
