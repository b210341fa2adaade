"""Running one evaluator on one case: deadline, retries with backoff, and no exceptions out.

Whatever an evaluator does (raise, hang, return garbage), the caller gets an
`Outcome` with a status.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from tracefact import semconv
from tracefact._retry import Backoff, is_transient
from tracefact.evaluators.base import (
    EvalCase,
    EvalResult,
    EvaluationError,
    EvaluationTimeout,
    Evaluator,
    RateLimitError,
)
from tracefact.pipeline.enrich import Outcome


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, within one overall deadline per evaluation."""

    timeout_seconds: float = 30.0
    max_retries: int = 2
    backoff: Backoff = field(default_factory=Backoff)

    def delay(self, attempt: int, error: BaseException) -> float:
        """The wait before the next attempt: the provider's Retry-After, else backoff."""
        retry_after = error.retry_after if isinstance(error, RateLimitError) else None
        return self.backoff.delay(attempt, retry_after)


async def run_evaluator(evaluator: Evaluator, case: EvalCase, policy: RetryPolicy) -> Outcome:
    name = evaluator.name
    started = time.perf_counter()

    def outcome(
        status: semconv.EvalStatus,
        result: EvalResult | None = None,
        error: str | None = None,
        spent_usd: float | None = None,
    ) -> Outcome:
        latency_ms = (time.perf_counter() - started) * 1000
        return Outcome(name, status, result, error, latency_ms, spent_usd)

    async def attempts() -> EvalResult:
        attempt = 0
        while True:
            try:
                result = await evaluator.evaluate(case)
            except Exception as exc:
                if attempt >= policy.max_retries or not is_transient(exc):
                    raise
                await asyncio.sleep(policy.delay(attempt, exc))
                attempt += 1
                continue
            if not isinstance(result, EvalResult):
                raise EvaluationError(f"evaluator returned {type(result).__name__}, not EvalResult")
            return result

    try:
        result = await asyncio.wait_for(attempts(), policy.timeout_seconds)
    except (asyncio.TimeoutError, EvaluationTimeout):
        return outcome(semconv.STATUS_TIMEOUT, error=f"no result within {policy.timeout_seconds}s")
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        return outcome(semconv.STATUS_ERROR, error=error, spent_usd=getattr(exc, "cost_usd", None))
    return outcome(semconv.STATUS_OK, result=result)
