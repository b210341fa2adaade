"""Running one evaluator on one case: its deadline, retries with backoff, no exceptions out.

Whatever an evaluator does (raise anything, BaseExceptions included, hang, return
garbage, warn under a host that turns warnings into errors), the caller gets an
`Outcome` with a status.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from tracefact import semconv
from tracefact._clock import SYSTEM, Clock
from tracefact._retry import Backoff, Retries, is_transient
from tracefact._warnings import evaluator_warnings
from tracefact.evaluators.base import (
    EvalCase,
    EvalResult,
    EvaluationError,
    EvaluationTimeout,
    Evaluator,
    RateLimitError,
)
from tracefact.pipeline.verdict import Outcome

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, within one overall deadline per evaluation.

    `timeout_seconds` is that deadline's distance from the evaluation's start; the
    pipeline sets the deadline once per job (`Jobs.start`) and passes it here.
    """

    timeout_seconds: float = 30.0
    max_retries: int = 2
    backoff: Backoff = field(default_factory=Backoff)

    def delay(self, attempt: int, error: BaseException) -> float | None:
        """The wait before the next attempt, or None: give up (`tracefact._retry.Retries`).

        The provider's Retry-After when it gave one, else backoff; None when `error` is
        permanent or the retries are spent.
        """
        retry_after = error.retry_after if isinstance(error, RateLimitError) else None
        retries = Retries(self.max_retries, self.backoff)
        return retries.delay(attempt, is_transient(error), retry_after)


def checked(result: EvalResult) -> EvalResult:
    """`result` validated again, since a result may be built unvalidated or changed after.

    One built with `model_construct` or given an explanation of None or a NaN score later
    is this evaluator's error, never another's.
    """
    score = result.__dict__.get("score")
    if isinstance(score, float) and math.isnan(score):
        raise EvaluationError("evaluator returned score NaN: a score is between 0 and 1")
    try:
        return EvalResult.model_validate(dict(result.__dict__))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, error['loc']))}: {error['msg']}" for error in exc.errors()
        )
        raise EvaluationError(f"evaluator returned an invalid result: {problems}") from None


def _being_cancelled() -> bool:
    """Whether the running task was asked to stop (Python 3.10 cannot tell: assume so)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return cancelling is None or cancelling() > 0


async def run_evaluator(
    evaluator: Evaluator,
    case: EvalCase,
    policy: RetryPolicy,
    deadline: float | None = None,
    clock: Clock = SYSTEM,
) -> Outcome:
    """Run one evaluator on one case, retries included, until `deadline` (of `clock`).

    Without a deadline, it is `policy.timeout_seconds` from now. Never raises, except
    when the caller itself is cancelled.
    """
    name = evaluator.name
    started = time.perf_counter()
    if deadline is None:
        deadline = clock.now() + policy.timeout_seconds

    def outcome(
        status: semconv.EvalStatus,
        result: EvalResult | None = None,
        error: str | None = None,
        spent_usd: float | None = None,
    ) -> Outcome:
        latency_ms = (time.perf_counter() - started) * 1000
        return Outcome(name, status, result, error, latency_ms, spent_usd)

    fallback: EvalResult | None = None  # what an error offered to keep if retries run out

    async def attempts() -> EvalResult:
        nonlocal fallback
        attempt = 0
        while True:
            try:
                with evaluator_warnings():  # a dependency's warning is not the case's error
                    result = await evaluator.evaluate(case)
            except asyncio.CancelledError as exc:
                if _being_cancelled():  # our deadline or shutdown: let it through
                    raise
                raise EvaluationError("evaluator raised CancelledError uncancelled") from exc
            except GeneratorExit:  # the coroutine is being closed: never swallow that
                raise
            except Exception as exc:
                if isinstance(exc, EvaluationError) and exc.fallback is not None:
                    fallback = exc.fallback
                delay = policy.delay(attempt, exc)
                if delay is None:
                    raise
                await asyncio.sleep(delay)
                attempt += 1
                continue
            except BaseException as exc:  # SystemExit & co. are the evaluator's failure only
                raise EvaluationError(f"evaluator raised {type(exc).__name__}: {exc}") from exc
            if not isinstance(result, EvalResult):
                raise EvaluationError(f"evaluator returned {type(result).__name__}, not EvalResult")
            return checked(result)

    try:
        result = await _within(attempts(), deadline - clock.now())
    except Exception as exc:
        if fallback is not None:  # retries ran out: keep the result the error carried
            return outcome(semconv.STATUS_OK, result=fallback)
        if isinstance(exc, (asyncio.TimeoutError, EvaluationTimeout)):
            return outcome(
                semconv.STATUS_TIMEOUT, error=f"no result within {policy.timeout_seconds}s"
            )
        error = f"{type(exc).__name__}: {exc}"
        return outcome(semconv.STATUS_ERROR, error=error, spent_usd=getattr(exc, "cost_usd", None))
    return outcome(semconv.STATUS_OK, result=result)


async def _within(coroutine: Coroutine[Any, Any, T], seconds: float) -> T:
    """`asyncio.wait_for(coroutine, seconds)`, run in the calling task where Python can.

    Python 3.11's `wait_for` runs the coroutine in a task of its own, with a future to
    wait on: per evaluation, more of the loop's work than an instant evaluator's whole
    run. `asyncio.timeout` (3.11+) cancels the calling task instead, and a deadline
    already past still runs nothing, as with `wait_for`.
    """
    if sys.version_info < (3, 11):
        return await asyncio.wait_for(coroutine, max(0.0, seconds))
    if seconds <= 0:
        coroutine.close()
        raise asyncio.TimeoutError
    async with asyncio.timeout(seconds):
        return await coroutine
