"""HTTP details shared by the clients that talk to providers and backends."""

from __future__ import annotations

from collections.abc import Mapping


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from a numeric Retry-After header; absent, dates and garbage give None."""
    value = headers.get("retry-after") if headers else None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:  # an HTTP date: the caller's own backoff decides
        return None
