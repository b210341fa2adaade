"""`Jobs`: every admitted span from its job's opening to its last verdict, under one lock.

A job's state changes only here, one method per transition, so that whoever races for
a job (the evaluation loop, the watchdog, shutdown, a replaced loop) gets a clear answer:
`open` (refused once shutdown has begun), `start` (once, which sets its one deadline),
`release` (its span leaves before its verdict), `finish` (once: the caller delivers its
last verdict) and `close` (once: the caller gives its place in flight back).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, NamedTuple, TypeVar

from tracefact._clock import SYSTEM, Clock
from tracefact.conventions import Reading
from tracefact.pipeline.verdict import SpanRecord
from tracefact.pipeline.worker import Worker
from tracefact.sampling import Decision

S = TypeVar("S")


class Job(Generic[S]):
    """One admitted span on its way through evaluation; its host's span is `span`."""

    __slots__ = (
        "counted",
        "deadline",
        "decision",
        "done",
        "ended",
        "held",
        "reading",
        "record",
        "span",
        "unread",
        "worker",
    )

    def __init__(
        self,
        record: SpanRecord,
        span: S,
        decision: Decision,
        reading: Reading | None,
        held: bool,
        ended: float,
        unread: Unread[S] | None = None,
    ) -> None:
        self.record = record
        self.span = span
        self.decision = decision
        """The sampler's decision: it holds the job's place in flight (`Admission`)."""
        self.reading = reading
        """The case read off the span, and where its contexts came from (None: not yet)."""
        self.unread = unread
        """What reading it on the evaluation loop takes, until it is read there."""
        self.held = held
        """The span waits for its verdict (attach "enrich"); once released it has left."""
        self.counted = False
        """A verdict with a status left with the span: the carrier's is not counted again."""
        self.ended = ended
        """When its span ended (the pipeline's clock): its hold limit counts from then."""
        self.deadline: float | None = None
        """Monotonic time by which its evaluation must end; set once, when it starts."""
        self.done = False
        """Finished: its last verdict is delivered (or being delivered), nothing else may be."""
        self.worker: Worker[Job[S]] | None = None
        """The evaluation loop it was handed to."""


class Unread(NamedTuple, Generic[S]):
    """A span to read on the evaluation loop rather than on the thread that ended it."""

    prepare: Callable[[], tuple[SpanRecord, S]]
    """The host's record and span as they are to be read and sent on (content finished)."""
    grounding: Sequence[str]
    evidence: Sequence[str]
    """Its trace's evidence as the span ended (`SpanReader.evidence`)."""


class Finished(NamedTuple):
    """What the one caller that settles a job needs to deliver its verdict."""

    held: bool
    """Still held: the verdict goes on the span itself, else on a carrier span."""
    counted: bool


class Jobs(Generic[S]):
    """The open jobs and the evaluation loop that runs them.

    `worker` is the loop new jobs go to; it changes only with `replace`, under the same
    lock as `open`, so that a job is always either moved or handed to the new loop.
    """

    def __init__(self, worker: Worker[Job[S]], clock: Clock = SYSTEM) -> None:
        self.worker = worker
        self.clock = clock
        self.closed = False
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._open: set[Job[S]] = set()

    def open(self, job: Job[S]) -> Worker[Job[S]] | None:
        """Track the job and pick its loop; None once shutdown has begun."""
        with self._lock:
            if self.closed:
                return None
            self._open.add(job)
            job.worker = self.worker
            return self.worker

    def start(self, job: Job[S], timeout_seconds: float) -> float | None:
        """Its deadline, set now; None for a job finished or already started elsewhere."""
        with self._lock:
            if job.done or job.deadline is not None:
                return None
            job.deadline = self.clock.now() + timeout_seconds
            return job.deadline

    def release(self, job: Job[S], counted: bool) -> bool:
        """Let a held span leave before its verdict; False if it has left already."""
        with self._lock:
            if not job.held or job.done:
                return False
            job.held = False
            job.counted = counted
            return True

    def finish(self, job: Job[S]) -> Finished | None:
        """Mark the job done; None for every caller but the first."""
        with self._lock:
            if job.done:
                return None
            job.done = True
            return Finished(job.held, job.counted)

    def close(self, job: Job[S]) -> bool:
        """Forget a finished job; True once, for the caller that gives its place back."""
        with self._lock:
            if job not in self._open:
                return False
            self._open.discard(job)
            self._idle.notify_all()
            return True

    def shut(self) -> bool:
        """Open no more jobs; True for the first call only."""
        with self._lock:
            first, self.closed = not self.closed, True
            return first

    def unfinished(self) -> list[Job[S]]:
        """Open jobs not yet done."""
        with self._lock:
            return [job for job in self._open if not job.done]

    def replace(self, new: Worker[Job[S]]) -> tuple[Worker[Job[S]], list[Job[S]], list[Job[S]]]:
        """Send jobs to `new` from now on: the old loop, its started jobs, those moved."""
        with self._lock:
            old, self.worker = self.worker, new
            started: list[Job[S]] = []
            moved: list[Job[S]] = []
            for job in self._open:
                if job.done or job.worker is not old:
                    continue
                if job.deadline is None:
                    job.worker = new
                    moved.append(job)
                else:
                    started.append(job)
            return old, started, moved

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no job is open; False if `timeout` seconds passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._open, timeout)
