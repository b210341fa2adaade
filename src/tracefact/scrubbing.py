"""Scrubbing: secrets never leave the process in anything tracefact writes.

Two checks, after Logfire's scrubber, adapted to LLM content:

- names (argument names, keys inside recorded dicts): a name made of words such as
  ``password``, ``secret``, ``api key``, ``session``, ``cookie``, ``csrf`` or ending in
  ``token`` is secret, and its whole value is replaced;
- values (any text tracefact records): secret-shaped substrings (provider keys such as
  ``sk-...``, ``ghp_...``, ``AKIA...``, JWTs, the password of a DSN, bearer tokens,
  ``password=...`` assignments, a URL's query parameters with a secret name, PEM
  private keys, card and social security numbers) are replaced, and the rest of the
  text is kept, since a prompt that mentions a password is still worth evaluating.

Only spans tracefact creates are scrubbed; spans of other instrumentations pass as
they are. The module is a leaf: instrumentation and the pipeline both use it.
"""

from __future__ import annotations

import functools
import itertools
import logging
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

SCRUBBED = "[SCRUBBED]"

# Words that make a name secret wherever they appear in it (``session_id``, ``secretKey``).
_SECRET_WORDS = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "secret",
        "secrets",
        "auth",
        "authorization",
        "credential",
        "credentials",
        "creds",
        "apikey",
        "session",
        "sessionid",
        "cookie",
        "cookies",
        "csrf",
        "xsrf",
        "jwt",
        "ssn",
        "signature",
        "bearer",
        "privatekey",
        "dsn",
    }
)
# Two words that do so together (``api_key``, ``credit-card``, ``social security``).
_SECRET_PAIRS = frozenset(
    {
        ("api", "key"),
        ("private", "key"),
        ("access", "key"),
        ("signing", "key"),
        ("encryption", "key"),
        ("credit", "card"),
        ("card", "number"),
        ("social", "security"),
        ("connection", "string"),
    }
)
# Words that do so only as the last word (``githubToken``; not ``max_tokens``, ``token_count``).
_SECRET_LAST_WORDS = frozenset({"token"})

# Query parameters secret by name in a URL only (`?key=` of Google's APIs, `?sig=` of
# Azure's shared access signatures), beside the names secret everywhere.
_SECRET_QUERY_NAMES = frozenset({"key", "sig"})

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")

# Secret-shaped values; group 1, when present, is the part to replace.
_VALUE_PATTERNS = (
    r"\bsk-(?:[a-z]+-)?[A-Za-z0-9_\-]{16,}",  # OpenAI, Anthropic
    r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe
    r"\bgh[pousr]_[A-Za-z0-9]{30,}",  # GitHub
    r"\bgithub_pat_[A-Za-z0-9_]{30,}",
    r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",  # AWS access key id
    r"\bAIza[A-Za-z0-9_\-]{30,}",  # Google API key
    r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack
    r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*",  # JWT
    r"-----BEGIN[A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z ]*PRIVATE KEY-----|$)",
    r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]*:([^\s@/]+)@",  # DSN password
    # A URL's query parameter: its value is replaced when its name is secret (`?token=`).
    r"[?&](?P<query_name>[A-Za-z][A-Za-z0-9_.\-]*)=(?P<query_value>[^&#?\s\"']+)",
    r"(?i:\b(?:bearer|basic|token)\s+)([A-Za-z0-9._~+/=\-]{12,})",  # Authorization values
    # ``password=hunter2``, ``"api_key": "..."``, ``secret: ...``
    r"(?i:(?:password|passwd|passphrase|pwd|secret|api[_\-]?key|access[_\-]?token|"
    r"auth[_\-]?token|client[_\-]?secret|private[_\-]?key)[\"']?\s*[:=]\s*[\"']?)"
    # Not a placeholder: tracefact's own hints write `api_key=...`, which is no secret.
    r"(?!\[(?:REDACTED|SCRUBBED)\]|\.\.\.(?![^\s\"',;&})]))([^\s\"',;&}]{3,})",
    r"\b\d{3}-\d{2}-\d{4}\b",  # US social security number
    r"\b(?:\d[ \-]?){12,18}\d\b",  # card number (checked with Luhn below)
)
# Every default value pattern contains one of these literals, a run of digits, or a
# trigger word: cheap tests (substring checks first) that most prose fails, so the
# full pattern runs only on likely secrets.
_TRIGGER_LITERALS = (
    "_",
    "sk-",
    "eyj",
    "akia",
    "asia",
    "aiza",
    "xox",
    "pass",
    "pwd",
    "secret",
    "key",
    "token",
    "bearer",
    "basic",
    "://",
    "-----begin",
)
"""Looked for in the lower-cased text: provider prefixes and the words of assignments."""
_DIGIT_RUN = re.compile(r"\d[\d \-]{10}")
"""Card and social security numbers start with a run like this."""
_CARD = re.compile(r"(?:\d[ \-]?){12,18}\d")
_NAME_CACHE_SIZE = 4096


@dataclass(frozen=True)
class ScrubbingOptions:
    """What `tracefact.configure(scrubbing=...)` takes; ``False`` turns scrubbing off.

    Attributes:
        extra_patterns: regular expressions (case-insensitive) for more secrets: a name
            they match is secret, and a value's matching substring is replaced.
        allow_keys: names never treated as secret (compared case-insensitively), e.g.
            ``"session_id"`` when session ids are not sensitive in your app.
    """

    extra_patterns: Sequence[str] = ()
    allow_keys: Collection[str] = ()


class Scrubber:
    """Decides which names are secret and replaces secret-shaped text.

    Both checks are cheap on the common path: name decisions are cached, and a value
    is scanned once by one compiled pattern.
    """

    def __init__(self, options: ScrubbingOptions | None = None) -> None:
        options = options or ScrubbingOptions()
        self.options = options
        self._allowed = frozenset(key.lower() for key in options.allow_keys)
        extra = [re.compile(p, re.IGNORECASE) for p in options.extra_patterns]
        self._extra_names = extra
        self._prefilter = not extra  # a user's pattern may match anything
        patterns = [*_VALUE_PATTERNS, *(f"(?i:{p})" for p in options.extra_patterns)]
        self._values = re.compile("|".join(f"(?:{p})" for p in patterns))
        self.is_secret_name = functools.lru_cache(maxsize=_NAME_CACHE_SIZE)(self._secret_name)

    def _secret_name(self, name: str) -> bool:
        """True for a name whose value must never reach a span."""
        if name.lower() in self._allowed:
            return False
        if any(p.search(name) for p in self._extra_names):
            return True
        words = [w.lower() for w in _WORD.findall(name)]
        if not words:
            return False
        if words[-1] in _SECRET_LAST_WORDS or any(w in _SECRET_WORDS for w in words):
            return True
        return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words))

    def scrub_text(self, text: str) -> tuple[str, bool]:
        """The text with secret-shaped parts replaced, and whether anything was."""
        if self._prefilter and not _maybe_secret(text):
            return text, False  # the common case for prose: cheap scans, no copy
        if self._values.search(text) is None:
            return text, False
        changed = False

        def replace(match: re.Match[str]) -> str:
            nonlocal changed
            whole = match.group(0)
            if match.group("query_name"):
                start = match.start("query_value") - match.start()
                name = match.group("query_name")
                if name.lower() not in _SECRET_QUERY_NAMES and not self.is_secret_name(name):
                    return whole[:start] + self._values.sub(replace, whole[start:])
                changed = True
                return whole[:start] + SCRUBBED
            if _CARD.fullmatch(whole) and not _luhn(whole):
                return whole
            changed = True
            for group in range(1, len(match.groups()) + 1):
                if match.group(group):  # replace only the secret part, e.g. a DSN's password
                    start, end = (
                        match.start(group) - match.start(),
                        match.end(group) - match.start(),
                    )
                    return whole[:start] + SCRUBBED + whole[end:]
            return SCRUBBED

        scrubbed = self._values.sub(replace, text)
        return scrubbed, changed


def _maybe_secret(text: str) -> bool:
    lowered = text.lower()
    for literal in _TRIGGER_LITERALS:  # one C-level substring search each, no regex
        if literal in lowered:
            return True
    return _DIGIT_RUN.search(text) is not None


def _luhn(candidate: str) -> bool:
    digits = [int(c) for c in candidate if c.isdigit()]
    total = 0
    for i, digit in enumerate(reversed(digits)):
        if i % 2:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return total % 10 == 0


def valid_utf8(text: str) -> str:
    """The text with lone surrogates replaced.

    OTLP's encoder drops a span's attribute that is not valid UTF-8, and results
    must never be lost that way.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


DEFAULT_SCRUBBER = Scrubber()
_current: Scrubber | None = DEFAULT_SCRUBBER


def check_scrubbing(options: ScrubbingOptions) -> ScrubbingOptions:
    """`options` with patterns that compile and keys that are names, else a ValueError."""
    for pattern in options.extra_patterns:
        try:
            re.compile(pattern)
        except (re.error, TypeError) as exc:
            raise ValueError(f"pattern {pattern!r}: {exc}") from None
    if isinstance(options.allow_keys, str) or not all(
        isinstance(k, str) for k in options.allow_keys
    ):
        raise ValueError("allow_keys must be a list of str")
    return options


def set_scrubbing(options: ScrubbingOptions | bool | None) -> None:
    """Process-wide: ``None``/``True`` the default patterns, ``False`` off, or options."""
    global _current
    if options is None or options is True:
        _current = DEFAULT_SCRUBBER
    elif options is False:
        _current = None
    else:
        _current = Scrubber(options)


def current_scrubber() -> Scrubber | None:
    """The scrubber `configure` set; None when scrubbing is off."""
    return _current


def clean_text(text: str) -> str:
    """Scrub text tracefact writes besides recorded content and make it valid UTF-8.

    For errors, explanations and log lines.
    """
    scrubber = _current
    if scrubber is not None:
        text = scrubber.scrub_text(text)[0]
    return valid_utf8(text)


class ScrubbingFilter(logging.Filter):
    """Scrubs tracefact's log records (message and traceback), whichever of its loggers made them.

    A logged provider error may quote a key. Run as each record is made (`_scrub_records`):
    a logger's filter sees only the records logged on it, not those of its children
    (`tracefact.collector`, ...), which reach every handler without it.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite a tracefact record in place; never drops one."""
        name = record.name or ""  # None in a record `logging.makeLogRecord` made
        if _current is None or not (name == "tracefact" or name.startswith("tracefact.")):
            return True
        try:
            record.msg, record.args = clean_text(record.getMessage()), None
            if record.exc_info and not record.exc_text:
                record.exc_text = clean_text(logging.Formatter().formatException(record.exc_info))
        except Exception:  # a log line is never worth an exception
            pass
        return True


def _scrub_records() -> None:
    """Every log record made from now on passes `ScrubbingFilter`, before any handler."""
    make = logging.getLogRecordFactory()
    scrubbing = ScrubbingFilter()

    def record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        made = make(*args, **kwargs)
        scrubbing.filter(made)
        return made

    logging.setLogRecordFactory(record)


_scrub_records()
