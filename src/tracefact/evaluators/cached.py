"""`Cached`: remember results, and let concurrent identical requests share one evaluation.

Identical cases are common (retries, replays, the same FAQ answered all day) and a
judge call costs money and seconds. The key is a sha256 of the evaluator's
`describe()` (its configuration, so a different model or prompt never shares
entries) and the case's input, contexts and output; metadata does not count.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import OrderedDict

from tracefact.evaluators.base import EvalCase, EvalResult, Evaluator, EvaluatorDescription


class Cached:
    """An LRU cache with time-to-live in front of any evaluator, with single-flight.

    A hit (or a request that joined one already in flight) returns the stored result
    with ``cost_usd=0`` and ``raw["cache"] = "hit"``: the money was spent once. Errors
    are not cached.
    """

    def __init__(
        self, evaluator: Evaluator, maxsize: int = 1024, ttl: float | None = 3600.0
    ) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, got {maxsize}")
        if ttl is not None and ttl <= 0:
            raise ValueError(f"ttl must be positive or None, got {ttl}")
        self.evaluator = evaluator
        self.name = evaluator.name
        self.maxsize = maxsize
        self.ttl = ttl
        self._identity = evaluator.describe().identity()
        self._entries: OrderedDict[str, tuple[float, EvalResult]] = OrderedDict()
        self._lock = threading.Lock()  # entries may be shared by loops on several threads
        # In-flight evaluations belong to the loop that started them.
        self._inflight: dict[tuple[asyncio.AbstractEventLoop, str], asyncio.Task[EvalResult]] = {}

    def describe(self) -> EvaluatorDescription:
        inner = self.evaluator.describe()
        cache = {"maxsize": self.maxsize, "ttl": self.ttl}
        return inner.model_copy(update={"settings": {**inner.settings, "cache": cache}})

    def key(self, case: EvalCase) -> str:
        material = json.dumps(
            [self._identity, case.input, case.contexts, case.output], ensure_ascii=False
        )
        return hashlib.sha256(material.encode()).hexdigest()

    async def evaluate(self, case: EvalCase) -> EvalResult:
        started = time.perf_counter()
        key = self.key(case)
        stored = self._get(key)
        if stored is not None:
            return _as_hit(stored, started)
        slot = (asyncio.get_running_loop(), key)
        task = self._inflight.get(slot)
        if task is not None:
            return _as_hit(await asyncio.shield(task), started)
        task = asyncio.ensure_future(self._fill(key, case))
        self._inflight[slot] = task
        task.add_done_callback(lambda done: self._settle(slot, done))
        # Shielded: one caller giving up must not cancel the evaluation others wait for.
        return await asyncio.shield(task)

    async def _fill(self, key: str, case: EvalCase) -> EvalResult:
        result = await self.evaluator.evaluate(case)
        expires = time.monotonic() + self.ttl if self.ttl is not None else float("inf")
        with self._lock:
            self._entries[key] = (expires, result)
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        return result

    def _settle(
        self, slot: tuple[asyncio.AbstractEventLoop, str], task: asyncio.Task[EvalResult]
    ) -> None:
        self._inflight.pop(slot, None)
        if not task.cancelled():
            task.exception()  # retrieved, so an error nobody awaited is not logged as lost

    def _get(self, key: str) -> EvalResult | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            expires, result = entry
            if expires <= time.monotonic():
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return result

    def __len__(self) -> int:
        return len(self._entries)


def _as_hit(result: EvalResult, started: float) -> EvalResult:
    return result.model_copy(
        update={
            "latency_ms": (time.perf_counter() - started) * 1000,
            "cost_usd": 0.0,
            "raw": {**result.raw, "cache": "hit"},
        }
    )
