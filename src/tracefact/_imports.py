"""Optional dependencies, imported on first use with the settings tracefact needs.

A missing one is a `MissingExtraError` (`tracefact.errors`) that names the extra to
install. A leaf: it imports nothing of tracefact but the error tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

from tracefact.errors import MissingExtraError, install_hint

__all__ = [
    "MissingExtraError",
    "import_extra",
    "import_litellm",
    "install_hint",
    "require_extra",
]


def import_extra(module: str, extra: str) -> ModuleType:
    """`module`, or a `MissingExtraError` naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module.partition(".")[0]:
            raise  # the module is there but one of its own imports is broken
        raise MissingExtraError(module, extra) from exc


EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "collector": ("grpc", "yaml", "prometheus_client", "opentelemetry.exporter.prometheus"),
}
"""What an extra that several parts share must provide, checked at once by `require_extra`."""


def require_extra(extra: str) -> None:
    """A `MissingExtraError` naming `extra` when any module it provides is missing.

    A command that needs a whole extra checks it first, so a user installs it once
    instead of hearing of each of its modules (or a smaller extra inside it) in turn.
    """
    for module in EXTRA_MODULES[extra]:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # a parent package is missing
            found = False
        if not found:
            raise MissingExtraError(module, extra)


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


async def stop_litellm_worker() -> None:
    """Stop litellm's logging worker when it runs on this event loop, before the loop closes.

    litellm starts a background task on the loop of its first async call; a loop closed
    under it leaves a coroutine that prints "Event loop is closed" tracebacks when it is
    collected. Does nothing when litellm was never imported or works on another loop.
    """
    module = sys.modules.get("litellm.litellm_core_utils.logging_worker")
    if module is None:
        return
    for _ in range(3):  # a call's success logging is enqueued a few loop turns after it returns
        await asyncio.sleep(0)
    worker = getattr(module, "GLOBAL_LOGGING_WORKER", None)
    task = getattr(worker, "_worker_task", None)
    if isinstance(task, asyncio.Task) and task.get_loop() is asyncio.get_running_loop():
        # Finish what is queued first, or the next loop inherits it (and logs a warning).
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(worker.flush(), 2.0)  # type: ignore[union-attr]
        await worker.stop()  # type: ignore[union-attr]
