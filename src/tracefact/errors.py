"""tracefact's errors: one tree with one root, so a caller catches exactly what it means.

    TracefactError                      anything tracefact raises on purpose
    ├── ConfigurationError (ValueError) a setting is wrong; the message names it
    ├── MissingExtraError (ImportError) an optional dependency is not installed
    └── EvaluationError                 an evaluator failed (tracefact.evaluators.base)
        └── ...                         InvalidCaseError, BadReplyError, ProviderError, ...

`transient` says whether the same call may succeed later unchanged (`tracefact._retry`
retries those). This module is a leaf: it imports nothing of tracefact.
"""

from __future__ import annotations


class TracefactError(Exception):
    """The root of every error tracefact raises on purpose."""

    transient: bool = False
    """True when trying again later, unchanged, may succeed (rate limits, 5xx, lost connections)."""


class ConfigurationError(TracefactError, ValueError):
    """A setting is missing or wrong; the message names it where it was given.

    A `ValueError` as well, as the checks it replaced raised.
    """


def install_hint(extra: str) -> str:
    """The commands that install an extra, e.g. ``pip install 'tracefact[litellm]'``."""
    return f"pip install 'tracefact[{extra}]' (from a clone: pip install -e '.[{extra}]')"


class MissingExtraError(TracefactError, ImportError):
    """An optional dependency is not installed: permanent until it is, so never retried.

    The package is not on a public index, so the hint gives the command for a wheel and
    for a clone.
    """

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(f"{module} is not installed; install the extra: {install_hint(extra)}")
        self.name = module
        self.extra = extra
