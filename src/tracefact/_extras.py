"""Optional dependencies: importing them, and saying how to install them when they are missing.

The package is not on a public index, so the hint gives both the install command for a
released wheel and the one that works from a clone of the repository.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from tracefact.evaluators.base import EvaluationError


def install_hint(extra: str) -> str:
    """The commands that install an extra, e.g. ``pip install 'tracefact[litellm]'``."""
    return f"pip install 'tracefact[{extra}]' (from a clone: pip install -e '.[{extra}]')"


class MissingExtraError(EvaluationError, ImportError):
    """An optional dependency is not installed; permanent until it is, so never retried."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(f"{module} is not installed; install the extra: {install_hint(extra)}")
        self.name = module
        self.extra = extra


def import_extra(module: str, extra: str) -> ModuleType:
    """`module`, or a `MissingExtraError` naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module.partition(".")[0]:
            raise  # the module is there but one of its own imports is broken
        raise MissingExtraError(module, extra) from exc
