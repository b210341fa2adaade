"""Turning arbitrary Python values into safe, bounded span attribute text.

Everything here runs on the application's thread inside a decorated call, so it must
never raise and must stay cheap on the common path (a short ``str``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from itertools import islice
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tracefact.scrubbing import current_scrubber, valid_utf8
from tracefact.semconv import TRUNCATION_MARKER

Redactor = Callable[[str], str]

REDACTED = "[REDACTED]"
_MAX_ITEMS = 1000
_MAX_DEPTH = 20
_SCRUB_MARGIN = 1024
"""A text is cut to its limit plus this before it is scrubbed, then to its limit: a
secret that straddles the limit is still whole in what the scrubber sees."""


def is_secret_name(name: str) -> bool:
    """True for argument or dict-key names whose values must never reach a span."""
    scrubber = current_scrubber()
    return scrubber is not None and scrubber.is_secret_name(name)


class CaptureOptions(BaseModel):
    """How content is recorded; set process-wide by `tracefact.configure(capture=...)`.

    One of the option groups of the settings table (`tracefact.config`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    capture_content: bool = True
    """Record texts; False keeps only sizes and sha256 hashes."""
    max_attribute_length: int = Field(default=8192, ge=16)
    """Longer texts are truncated with a visible marker."""
    redact: Redactor | None = None
    """Applied to every text before anything is recorded."""


_options = CaptureOptions()


def set_capture_options(options: CaptureOptions) -> None:
    global _options
    _options = options


def capture_options() -> CaptureOptions:
    return _options


def to_text(value: Any, where: str = "", scrubbed: list[str] | None = None) -> tuple[str, bool]:
    """Serialise any value to text; the flag says whether the text is JSON.

    Values under secret-named keys are replaced; their paths (below `where`) are
    appended to `scrubbed`. Never raises: cycles, bytes, unserialisable and hostile
    objects all get a placeholder instead of an exception in the caller's code.
    """
    if isinstance(value, str):
        return value, False
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _bytes_placeholder(value), False
    try:
        plain = _jsonable(value, set(), 0, where, [] if scrubbed is None else scrubbed)
        if isinstance(plain, str):  # an object shown by its repr: no JSON quoting
            return plain, False
        return json.dumps(plain, ensure_ascii=False), True
    except Exception:  # a __repr__ or __iter__ that raises is the caller's bug, not a crash
        return _safe_repr(value), False


def finish(text: str, options: CaptureOptions, where: str, scrubbed: list[str]) -> str:
    """Apply the redactor, the scrubber, the length limit, and make the text valid UTF-8.

    `where` is appended to `scrubbed` when the scrubber replaced something; a cut
    text keeps a visible marker.
    """
    if options.redact is not None:
        try:
            text = str(options.redact(text))
        except Exception:
            # A failing redactor must not leak what it was meant to hide.
            return REDACTED
    limit = options.max_attribute_length
    length = len(text)
    if length > limit + _SCRUB_MARGIN:  # cut first: the caller pays for what is kept only
        text = text[: limit + _SCRUB_MARGIN]
    scrubber = current_scrubber()
    if scrubber is not None:
        text, changed = scrubber.scrub_text(text)
        if changed:
            scrubbed.append(where)
    if len(text) > limit:
        cut = (
            max(length, len(text)) - limit if length > limit + _SCRUB_MARGIN else len(text) - limit
        )
        text = text[:limit] + TRUNCATION_MARKER.format(cut)
    return text if text.isascii() else valid_utf8(text)


def fingerprint(text: str) -> tuple[int, str]:
    """Length and sha256 of a text: what `capture_content=False` keeps."""
    return len(text), hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _jsonable(value: Any, path: set[int], depth: int, where: str, scrubbed: list[str]) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _bytes_placeholder(value)
    if depth >= _MAX_DEPTH:
        return "<max depth>"
    if id(value) in path:
        return "<cycle>"
    path.add(id(value))
    try:
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for i, (key, item) in enumerate(value.items()):
                if i >= _MAX_ITEMS:
                    out["…"] = f"{len(value) - _MAX_ITEMS} more items"
                    break
                name = str(key)
                if is_secret_name(name):
                    out[name] = REDACTED
                    scrubbed.append(f"{where}.{name}")
                else:
                    out[name] = _jsonable(item, path, depth + 1, f"{where}.{name}", scrubbed)
            return out
        if isinstance(value, (list, tuple, set, frozenset)):
            items = [
                _jsonable(item, path, depth + 1, f"{where}.{i}", scrubbed)
                for i, item in enumerate(islice(value, _MAX_ITEMS))
            ]
            if len(value) > _MAX_ITEMS:
                items.append(f"… {len(value) - _MAX_ITEMS} more items")
            return items
        dump = getattr(value, "model_dump", None)  # pydantic models
        if callable(dump):
            return _jsonable(dump(), path, depth + 1, where, scrubbed)
        return _safe_repr(value)
    finally:
        path.discard(id(value))


def _bytes_placeholder(value: bytes | bytearray | memoryview) -> str:
    return f"<{len(value)} bytes>"


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:
        return f"<unrepresentable {type(value).__name__}>"
