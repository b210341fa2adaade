"""Structured logs: one JSON object per line (or plain text), on standard error.

Every text of a line (message, fields, traceback) is scrubbed with the SDK's rules: an
upstream URL with a password, a provider error quoting a key, never reach the log.

A record's `extra` fields go into the object, so `logger.info("listening",
extra={"event": "listening", "http": 4318})` prints
`{"ts": ..., "level": "info", "event": "listening", "message": "listening", "http": 4318}`.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from tracefact.scrubbing import clean_text

_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(_scrubbed(entry), default=lambda value: clean_text(str(value)))


class TextFormatter(logging.Formatter):
    """The plain-text line, scrubbed."""

    def format(self, record: logging.LogRecord) -> str:
        return clean_text(super().format(record))


def _scrubbed(value: Any) -> Any:
    """Every string in a JSON-ready value scrubbed (keys are tracefact's own names)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {key: _scrubbed(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrubbed(item) for item in value]
    return value


def setup(log_format: str, level: str) -> None:
    """Send tracefact's logs (the collector's and the pipeline's) to standard error."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per forwarded batch
    # The pipeline copies spans into the SDK's attribute container, which warns about
    # OTLP values it has no type for (kvlists); the protobuf span forwarded keeps them.
    logging.getLogger("opentelemetry.attributes").setLevel(logging.ERROR)
