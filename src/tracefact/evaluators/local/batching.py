"""Micro-batching: concurrent `evaluate` calls on one event loop become one batch call.

One hand-off to a worker thread and one tokenizer call serve every case that arrived
in the same loop iteration (or, while the model is busy, within ``max_wait_ms``).
The model itself still reads each window in its own run (see `runtime`), so batching
saves thread hops, never changes a score.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tracefact.evaluators.base import EvalCase, EvalResult

BatchFunction = Callable[[Sequence[EvalCase]], list[EvalResult]]
"""Judges many cases at once, synchronously (run in the loop's default executor)."""


@dataclass
class _Pending:
    case: EvalCase
    future: asyncio.Future[EvalResult]


class Batcher:
    """Collects the calls made on one event loop into calls of `judge`.

    Args:
        loop: the event loop whose calls are gathered (one batcher per loop).
        judge: the batch function, run in the loop's default executor.
        max_cases: a batch is sent at once when it has this many cases.
        max_wait_ms: while a batch is running, how long new calls wait for company.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        judge: BatchFunction,
        max_cases: int,
        max_wait_ms: float,
    ) -> None:
        self.loop = loop
        self._judge = judge
        self._max_cases = max_cases
        self._max_wait_ms = max_wait_ms
        self._pending: list[_Pending] = []
        self._timer: asyncio.TimerHandle | asyncio.Handle | None = None
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()  # strong references until done

    def submit(self, case: EvalCase) -> asyncio.Future[EvalResult]:
        """The future result of `case`; must be called on `loop`."""
        future: asyncio.Future[EvalResult] = self.loop.create_future()
        self._pending.append(_Pending(case, future))
        if len(self._pending) >= self._max_cases:
            self._flush()
        elif self._timer is None:
            if self._in_flight:
                # The model is busy: gather what arrives meanwhile, for up to max_wait_ms.
                self._timer = self.loop.call_later(self._max_wait_ms / 1000.0, self._flush)
            else:
                # Idle: run after this loop iteration, with every call made in it.
                self._timer = self.loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if batch:
            self._in_flight += 1
            task = self.loop.create_task(self._run(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[_Pending]) -> None:
        cases = [item.case for item in batch]
        try:
            results = await self.loop.run_in_executor(None, self._judge, cases)
        except Exception as exc:
            for item in batch:
                if not item.future.done():
                    item.future.set_exception(exc)
            return
        finally:
            self._in_flight -= 1
        for item, result in zip(batch, results, strict=True):
            if not item.future.done():
                item.future.set_result(result)
