"""`Evaluation`: one job's run on the evaluation loop, from its case to its verdict.

The job's one deadline is set as it starts (`Jobs.start`: `timeout_seconds` from then)
and kept here: every evaluator runs until it, retries included (`run_evaluator`), and an
evaluator that ignores its cancellation is given `grace_seconds` more before the job
ends with status `timeout` and gives its place on the loop up. Only an evaluator that
blocks the loop itself escapes this; the watchdog replaces such a loop.
Whatever happens, the job ends with a verdict: judged, or `error`, `timeout`, `shutdown`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from tracefact import semconv
from tracefact.evaluators.base import Evaluator
from tracefact.pipeline.jobs import Job, Jobs
from tracefact.pipeline.metrics import PipelineMetrics
from tracefact.pipeline.retry import RetryPolicy, run_evaluator
from tracefact.pipeline.verdict import Verdict, cleaned, judged, unevaluated

logger = logging.getLogger("tracefact")

ENDED = "evaluation ended without a result"
OVERRAN = "evaluation did not end by its deadline (the evaluator ignored cancellation)"


class Evaluation:
    """Runs jobs and hands each verdict to `finish` (which acts on the first one only)."""

    def __init__(
        self,
        evaluators: Sequence[Evaluator],
        policy: RetryPolicy,
        grace_seconds: float,
        jobs: Jobs[Any],
        metrics: PipelineMetrics,
        finish: Callable[[Job[Any], Verdict], None],
    ) -> None:
        self.evaluators = tuple(evaluators)
        self.policy = policy
        self.grace_seconds = grace_seconds
        self.jobs = jobs
        self.metrics = metrics
        self.finish = finish

    async def run(self, job: Job[Any]) -> None:
        """Judge the job by its deadline, or end it with `timeout` a grace period later.

        The job is judged in the calling task, with one timer for the grace period: a
        task and a future more per job cost the loop more than an instant evaluator.
        """
        deadline = self.jobs.start(job, self.policy.timeout_seconds)
        if deadline is None:  # finished, or moved off a stuck loop and started elsewhere
            return
        task = asyncio.current_task()
        assert task is not None, "jobs run in a task of the evaluation loop"
        overran = asyncio.get_running_loop().call_later(
            deadline + self.grace_seconds - self.jobs.clock.now(), self._overran, job, task
        )
        verdict: Verdict | None = None
        try:
            verdict = await self._judge(job, deadline)
        except GeneratorExit:  # raised by the evaluator, or this coroutine is closed
            verdict = unevaluated(semconv.STATUS_ERROR, job.decision.rate, ENDED)
            raise
        except asyncio.CancelledError:  # the loop stops, or `_overran`
            if self.jobs.clock.now() >= deadline:
                verdict = unevaluated(semconv.STATUS_TIMEOUT, job.decision.rate, OVERRAN)
            else:
                verdict = unevaluated(
                    semconv.STATUS_SHUTDOWN, job.decision.rate, "evaluation cancelled"
                )
            raise
        finally:
            overran.cancel()
            if verdict is not None:
                self.finish(job, verdict)

    def _overran(self, job: Job[Any], task: asyncio.Task[Any]) -> None:
        """The evaluator ignored its cancellation: the job ends and its place is given up.

        The task is cancelled again and left to end whenever the evaluator lets it.
        """
        self.finish(job, unevaluated(semconv.STATUS_TIMEOUT, job.decision.rate, OVERRAN))
        if job.worker is not None:
            job.worker.leave(task)
        task.cancel()

    async def _judge(self, job: Job[Any], deadline: float) -> Verdict:
        """The job's verdict: judged, or `error` when the input or the pipeline failed."""
        try:
            assert job.reading is not None, "a job is read before it is judged"
            case = job.reading.case
            assert case is not None, "only spans with a case are judged"
            started = time.time_ns()
            runs = [
                run_evaluator(e, case, self.policy, deadline, self.jobs.clock)
                for e in self.evaluators
            ]
            # One evaluator (the usual case) is awaited in this task: gather would wrap it
            # in a task of its own, a quarter of the loop's work per span.
            results = [await runs[0]] if len(runs) == 1 else await asyncio.gather(*runs)
            outcomes = [cleaned(outcome) for outcome in results]
            for outcome in outcomes:
                self.metrics.evaluated(outcome)
            return judged(outcomes, job.reading, job.decision.rate, started, time.time_ns())
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except BaseException as exc:  # the input or the pipeline itself failed
            logger.exception("tracefact: evaluation job failed")
            return unevaluated(
                semconv.STATUS_ERROR, job.decision.rate, f"{type(exc).__name__}: {exc}"
            )
