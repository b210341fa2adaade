"""Executor threads that never keep the process alive.

`asyncio.to_thread` and `run_in_executor(None, ...)` use the loop's default executor,
whose threads the interpreter joins at exit (and refuses new work from once exit has
begun). An evaluator hanging in such a thread would keep the application from
exiting; these daemon threads are neither joined nor refused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class DaemonThreads(ThreadPoolExecutor):
    """One daemon thread per call (asyncio requires a ThreadPoolExecutor type).

    Calls are few and long (a model batch, a blocking client), so a thread per call
    costs little next to the call, and a call that never returns holds one thread only.
    """

    def __init__(self, name: str) -> None:
        super().__init__(max_workers=1, thread_name_prefix=name)
        self._name = name

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """Run `fn(*args, **kwargs)` on a new daemon thread."""
        future: Future[T] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # the caller gets every failure, as from a pool
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=run, name=self._name, daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing to join: the threads end with their calls or with the process."""
