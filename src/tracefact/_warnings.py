"""Warnings raised while an evaluator runs are logged, never turned into errors.

A dependency's warning (a rewording in pydantic, a deprecation in litellm) says nothing
about the case being judged, yet a host running with ``python -W error`` or pytest's
``filterwarnings = error`` would turn it into an exception that ends the evaluation with
status ``error``. `evaluator_warnings()` marks the running code as an evaluator's (a
context variable, so the mark follows ``asyncio.to_thread`` and tasks it starts, and no
other thread) and keeps one filter at the front of `warnings.filters` that matches only
marked code: there the warning is logged at debug level and ignored; everywhere else the
host's filters apply unchanged.

The filter is put back in front at each evaluation, since hosts reset the list (pytest
does so around every test).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import warnings
from collections.abc import Iterator
from typing import Any

logger = logging.getLogger("tracefact")

_in_evaluator: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "tracefact_in_evaluator", default=False
)


class _EvaluatorCode:
    """Stands where a filter holds its compiled message pattern: `warnings` calls `match`."""

    def match(self, message: str) -> bool:
        if not _in_evaluator.get():
            return False
        logger.debug("tracefact: warning inside an evaluator, ignored: %s", message)
        return True


_FILTER = ("ignore", _EvaluatorCode(), Warning, None, 0)


def _filter_in_front() -> None:
    filters: list[Any] = warnings.filters  # type: ignore[assignment]  # a list at run time
    if filters and filters[0] is _FILTER:
        return
    with contextlib.suppress(ValueError):
        filters.remove(_FILTER)
    filters.insert(0, _FILTER)
    mutated = getattr(warnings, "_filters_mutated", None)
    if mutated is not None:  # forget which warnings were already shown under the old list
        mutated()


@contextlib.contextmanager
def evaluator_warnings() -> Iterator[None]:
    """Within this block (and threads and tasks it starts), warnings are logged, not raised."""
    _filter_in_front()
    token = _in_evaluator.set(True)
    try:
        yield
    finally:
        # A coroutine closed by the garbage collector ends here in another context, where
        # the mark was never set: nothing to undo there.
        with contextlib.suppress(ValueError):
            _in_evaluator.reset(token)
