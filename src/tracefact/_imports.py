"""Optional dependencies, imported on first use with the settings tracefact needs.

A missing one is a `MissingExtraError` that names the extra to install. The package is
not on a public index, so the hint gives the command for a wheel and for a clone.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

from tracefact.evaluators.base import EvaluationError


def install_hint(extra: str) -> str:
    """The commands that install an extra, e.g. ``pip install 'tracefact[litellm]'``."""
    return f"pip install 'tracefact[{extra}]' (from a clone: pip install -e '.[{extra}]')"


class MissingExtraError(EvaluationError, ImportError):
    """An optional dependency is not installed: permanent until it is, so never retried."""

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


def import_litellm() -> Any:
    """litellm, which never reaches the network on import.

    Importing litellm costs seconds, so it happens only when a judge or the litellm
    instrumentation is first used; unless the user chose otherwise, litellm reads its
    price table from the package instead of downloading it (and retrying for seconds
    when offline).

    Raises:
        MissingExtraError: litellm is not installed (the ``litellm`` extra).
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return import_extra("litellm", "litellm")
