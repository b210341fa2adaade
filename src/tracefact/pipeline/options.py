"""`PipelineOptions`: the evaluation pipeline's knobs, named and validated in one place.

`tracefact.configure` builds them from its keyword arguments and `TRACEFACT_*`
variables (`Settings` inherits these fields); `EvaluationProcessor` takes them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Attach = Literal["enrich", "span"]


class PipelineOptions(BaseModel):
    """How sampled spans are held and evaluated.

    Invalid values raise `pydantic.ValidationError` (a `ValueError`) naming the field.

    Attributes:
        attach: "enrich" exports the span once, with its results; "span" exports it at
            once and its results follow on a carrier (EVALUATOR) span.
        queue_size: sampled spans in flight at once (admitted while open, waiting or
            being evaluated: the one bound on what the pipeline holds, its evaluation
            loop's queue included); past it, new ones are exported unevaluated with
            status `dropped`. The name is the public one (keyword, `TRACEFACT_QUEUE_SIZE`,
            the collector's `evaluation.queue_size`).
        concurrency: evaluations running at once on the evaluation loop.
        timeout_seconds: one deadline per evaluation, covering its retries (an
            evaluator that ignores its cancellation gets a grace period more).
        max_retries: retries of transient errors (backoff with jitter).
        max_hold_seconds: the longest an "enrich" span waits for its result; then it is
            exported with status `timeout` and the result follows on a carrier span.
        drain_seconds: how long `shutdown` lets running evaluations finish.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    attach: Attach = "enrich"
    queue_size: int = Field(default=1024, ge=1)
    concurrency: int = Field(default=16, ge=1)
    timeout_seconds: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    max_hold_seconds: float = Field(default=60.0, gt=0)
    drain_seconds: float = Field(default=10.0, ge=0)
