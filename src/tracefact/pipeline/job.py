"""`Job`: one sampled span on its way through evaluation.

Its flags make its export happen exactly once.
"""

from __future__ import annotations

import time

from opentelemetry.sdk.trace import ReadableSpan

from tracefact.conventions import Reading
from tracefact.sampling import Decision


class Job:
    """One sampled span; its flags change only under the pipeline's lock."""

    __slots__ = (
        "cost_usd",
        "deadline",
        "decision",
        "done",
        "ended",
        "exported",
        "reading",
        "sample_rate",
        "span",
        "worker",
    )

    def __init__(self, span: ReadableSpan, decision: Decision, exported: bool) -> None:
        self.span = span
        self.decision = decision
        """The sampler's decision, settled with `cost_usd` when the job's slot is freed."""
        self.sample_rate = decision.rate
        self.cost_usd: float | None = None
        """What the evaluation cost, once known (None: it ended without a known cost)."""
        self.ended = time.monotonic()
        self.exported = exported
        """The span (original or a copy) has gone downstream; results need a carrier."""
        self.done = False
        """Settled: its outcome is exported (or being exported) and nothing else may be."""
        self.deadline: float | None = None
        """Monotonic time by which its evaluation must have ended; set when it starts."""
        self.reading: Reading | None = None
        """The case read off the span as it ended, and where its contexts came from."""
        self.worker: object | None = None
        """The evaluation loop it was handed to (a stuck loop's jobs are settled at once)."""
