"""`Evaluation`: one job's run on the evaluation loop, from case to delivered outcome.

Reads the case (any reader error ends the job with status `error`), runs every
evaluator under the retry policy, records metrics and cost (the sampler gets the
cost when the slot is freed), and delivers the outcome. Whatever happens, a
`finally` settles the job: its span is exported with a status and its slot freed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from tracefact import semconv
from tracefact.conventions import Reading
from tracefact.evaluators.base import Evaluator
from tracefact.pipeline.delivery import Delivery
from tracefact.pipeline.enrich import outcome_attributes, outcome_events
from tracefact.pipeline.job import Job
from tracefact.pipeline.metrics import PipelineMetrics
from tracefact.pipeline.outcome import cleaned
from tracefact.pipeline.retry import RetryPolicy, run_evaluator
from tracefact.pipeline.slots import Slots
from tracefact.pipeline.watchdog import OVERRAN

logger = logging.getLogger("tracefact")


def found_attributes(reading: Reading) -> dict[str, Any]:
    """The contexts' source, and the contexts themselves unless the span holds them."""
    found: dict[str, Any] = {semconv.CONTEXTS_SOURCE: reading.contexts_source}
    explicit = (semconv.CONTEXT_SOURCE_EXPLICIT, semconv.CONTEXT_SOURCE_GROUNDING)
    if reading.case is not None and reading.contexts_source not in explicit:
        found[semconv.CONTEXTS] = reading.case.contexts
    return found


class Evaluation:
    """Runs jobs; `deadline_seconds` is how long one may run before the watchdog ends it."""

    def __init__(
        self,
        evaluators: Sequence[Evaluator],
        policy: RetryPolicy,
        metrics: PipelineMetrics,
        slots: Slots,
        delivery: Delivery,
        deadline_seconds: float,
    ) -> None:
        self.evaluators = tuple(evaluators)
        self.policy = policy
        self.metrics = metrics
        self.slots = slots
        self.delivery = delivery
        self.deadline_seconds = deadline_seconds

    async def run(self, job: Job) -> None:
        """Run every evaluator on the job's case; the job ends whatever happens here."""
        with self.slots.lock:  # a job moved off a stuck loop must not run twice
            if job.done or job.deadline is not None:
                return
            job.deadline = time.monotonic() + self.deadline_seconds
        started = time.time_ns()
        status: semconv.EvalStatus = semconv.STATUS_ERROR
        error = "evaluation ended without a result"
        try:
            reading = job.reading
            case = reading.case if reading is not None else None
            if reading is None or case is None:
                self.delivery.settle(job, semconv.STATUS_SKIPPED)
                return
            outcomes = [
                cleaned(outcome)
                for outcome in await asyncio.gather(
                    *(run_evaluator(e, case, self.policy) for e in self.evaluators)
                )
            ]
            for outcome in outcomes:
                self.metrics.evaluated(outcome)
            priced = [o for o in outcomes if o.cost_usd or o.status == semconv.STATUS_OK]
            if priced:  # the sampler settles it when the job's slot is freed
                job.cost_usd = sum(o.cost_usd or 0.0 for o in priced)
            attributes = {**found_attributes(reading), **outcome_attributes(outcomes)}
            events = outcome_events(outcomes, time.time_ns())
            results = [o.result for o in outcomes if o.result is not None]
            self.delivery.finish(job, attributes, events, started, results)
        except asyncio.CancelledError:  # past its deadline, or the pipeline stops
            if time.monotonic() >= job.deadline:
                status, error = semconv.STATUS_TIMEOUT, OVERRAN
            else:
                status, error = semconv.STATUS_SHUTDOWN, "evaluation cancelled"
            raise
        except GeneratorExit:  # closed (or an evaluator raised it): settled below
            raise
        except BaseException as exc:  # the input or the pipeline itself failed
            logger.exception("tracefact: evaluation job failed")
            error = f"{type(exc).__name__}: {exc}"
        finally:
            self.delivery.settle(job, status, error)  # nothing if already finished
