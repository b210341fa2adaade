"""Slot accounting: how many sampled spans the pipeline holds, and which jobs are open.

A sampled span reserves a slot when it starts (or, if first recognised when it
ends, then); the slot is freed exactly once, when its job is settled. A slot also
holds the sampler's decision: freeing it settles the decision with the sampler, with
the evaluation's cost when known, so a budget's reservation is given back exactly
once. One lock guards all of it and is never held while exporting.
"""

from __future__ import annotations

import threading

from tracefact.pipeline.job import Job
from tracefact.sampling import Decision, Sampler


class Slots:
    """At most `capacity` sampled spans held at once; a full pipeline refuses more."""

    def __init__(self, capacity: int, sampler: Sampler) -> None:
        self.capacity = capacity
        self.sampler = sampler
        self.lock = threading.Lock()
        self._idle = threading.Condition(self.lock)
        self._reserved: dict[int, Decision] = {}  # span id -> decision of open sampled spans
        self._held = 0  # reserved + submitted and unsettled jobs
        self._jobs: set[Job] = set()

    @property
    def held(self) -> int:
        """Slots in use (the queue depth metric)."""
        return self._held

    def reserve(self, span_id: int | None, decision: Decision) -> bool:
        """Take a slot for a span (remembered by id while it is open).

        False when full, and the sampler gets its decision back.
        """
        with self.lock:
            reserved = self._held < self.capacity
            if reserved:
                self._held += 1
                if span_id is not None:
                    self._reserved[span_id] = decision
        if not reserved:
            self.sampler.settle(decision, None)
        return reserved

    def take(self, span_id: int) -> Decision | None:
        """The decision of an open span that reserved a slot at start, if it did."""
        with self.lock:
            return self._reserved.pop(span_id, None)

    def free(self, decision: Decision) -> None:
        """Give back a slot whose span never became a job."""
        with self.lock:
            self._held -= 1
            self._idle.notify_all()
        self.sampler.settle(decision, None)

    def open_locked(self, job: Job) -> None:
        """Track a job that holds a slot until `settle` and `close` (caller holds `lock`)."""
        self._jobs.add(job)

    def settle(self, job: Job) -> bool:
        """Mark the job done; True for the one caller that gets to export it."""
        with self.lock:
            if job.done:
                return False
            job.done = True
            return True

    def close(self, job: Job) -> None:
        """Free a settled job's slot (once: later calls do nothing)."""
        with self.lock:
            closing = job in self._jobs
            if closing:
                self._jobs.discard(job)
                self._held -= 1
                self._idle.notify_all()
        if closing:
            self.sampler.settle(job.decision, job.cost_usd)

    def unsettled(self) -> list[Job]:
        """Jobs not yet done."""
        with self.lock:
            return self.unsettled_locked()

    def unsettled_locked(self) -> list[Job]:
        """Jobs not yet done (caller holds `lock`)."""
        return [job for job in self._jobs if not job.done]

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no job is open; False if `timeout` seconds passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._jobs, timeout)
