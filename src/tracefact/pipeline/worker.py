"""The worker thread: one asyncio loop that runs evaluations off the application's threads.

Jobs are handed over through a deque; the loop is woken at most once per batch of
submissions, so `submit` costs the application a deque append and, now and then,
one self-pipe write.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from tracefact._otel import suppressed_context

logger = logging.getLogger("tracefact")

Job = TypeVar("Job")


class Worker(Generic[Job]):
    """Runs `handle(job)` for each submitted job on a private event loop thread."""

    def __init__(self, handle: Callable[[Job], Awaitable[None]], name: str) -> None:
        self._handle = handle
        self._name = name
        self._incoming: deque[Job] = deque()
        self._wake_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Evaluation never traces itself: a judge's litellm call does not become an LLM span.
        self._context = suppressed_context()
        self._start_lock = threading.Lock()  # two first submissions must start one thread

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    def submit(self, job: Job) -> None:
        self._incoming.append(job)
        loop = self._loop or self._start()
        if not self._wake_scheduled:
            self._wake_scheduled = True  # a racing second wake-up only finds an empty deque
            loop.call_soon_threadsafe(self._drain, context=self._context)

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._start_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._run, args=(loop,), name=self._name, daemon=True
                )
                self._thread.start()
                self._loop = loop
            return self._loop

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.close()

    def _drain(self) -> None:
        self._wake_scheduled = False
        assert self._loop is not None
        while self._incoming:
            task = self._loop.create_task(self._guarded(self._incoming.popleft()))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _guarded(self, job: Job) -> None:
        try:
            await self._handle(job)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug in handling must not kill the loop
            logger.exception("tracefact: evaluation job failed")

    def stop(self, timeout: float) -> None:
        """Cancel what is still running and end the thread.

        Jobs not started are left in the deque: the owner accounts for every job it
        handed over.
        """
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def cancel_all() -> None:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            loop.stop()

        try:
            loop.call_soon_threadsafe(lambda: loop.create_task(cancel_all()))
        except RuntimeError:  # loop already closed
            return
        thread.join(timeout)
