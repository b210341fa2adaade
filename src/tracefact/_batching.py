"""`BatchSender[T, R]`: a bounded queue drained in batches by one thread, with retries.

OpenTelemetry has one `BatchProcessor[T]` under traces and logs; this is tracefact's,
under the export stage (`export.ExportProcessor`, spans to an exporter), the result
sinks (`sinks.http.HTTPSink`, results to a backend's API) and the collector's forwarder
(`collector.forwarder`, encoded requests to each upstream). Its owner says what a batch
becomes (`Transport.requests`), how one is sent (`Transport.send`) and what to do with
each outcome; the sender keeps the promises all three need:
- `submit` never blocks: past `max_queue` (in weight: spans, results) it refuses
  with `full`, after shutdown with `shutdown` (`semconv.Refusal`'s words), and the owner
  counts the refusal; `offer`, for items of weight one on an application's hot path,
  takes no lock while a batch gathers (the lock once per batch);
- every accepted item is accounted for once: `delivered`, or `lost` as `failed`
  (permanent, or out of retries) or `shutdown` (the drain deadline passed first);
- a transient failure is retried on a schedule of its own (`tracefact._retry.Retries`),
  so a request waiting for its retry does not hold up the next batch;
- `close(deadline)` pulls waiting retries in, bounds every call by the time left, and
  `join` abandons a call still under way at the deadline, so the process exits in time;
- the thread runs with instrumentation suppressed, starts on first use, and starts
  afresh in a forked child; its waits go through a `Clock`, so tests order events by
  moving time instead of sleeping.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from tracefact import semconv
from tracefact._clock import SYSTEM, Clock
from tracefact._otel import reset_after_fork, run_suppressed
from tracefact._retry import Attempt, Retries, failed_attempt

logger = logging.getLogger("tracefact")

T = TypeVar("T")
R = TypeVar("R")

Loss = Literal["failed", "shutdown"]
"""Why an accepted item never got through."""

JOIN_GRACE_SECONDS = 0.25
"""How long past the deadline `join` waits for a call bounded by it to report."""


class Transport(ABC, Generic[T, R]):
    """What a sender's owner says: how batches become requests, and what outcomes mean."""

    @abstractmethod
    def requests(self, batch: list[T]) -> Iterable[tuple[Sequence[T], R]]:
        """The requests that carry `batch`, each with the items it carries."""

    @abstractmethod
    def send(self, request: R, timeout: float | None) -> Attempt:
        """One call; `timeout` is the time left before the drain deadline, if draining."""

    @abstractmethod
    def delivered(self, items: Sequence[T], attempt: Attempt) -> None:
        """`items` got through (`attempt.rejected` of them dropped on arrival)."""

    @abstractmethod
    def lost(self, items: Sequence[T], reason: Loss, error: str) -> None:
        """`items` never got through, for `reason`."""

    def retrying(self, items: Sequence[T], retries: int, error: str) -> None:
        """A transient failure: `items` are tried again (retry number `retries`)."""


@dataclass(frozen=True)
class BatchOptions:
    """How a sender batches and retries.

    Attributes:
        max_queue: the weight waiting at once (None: unbounded, its owner bounds it).
        max_batch: a batch's weight; a batch leaves as soon as it is full.
        delay_seconds: the longest an item waits for a full batch (0: at once).
        retries: the retry rule (`max_retries` None: until the drain deadline).
        timeout_seconds: one call's limit outside the drain (None: the transport's own).
    """

    max_queue: int | None = 2048
    max_batch: int = 512
    delay_seconds: float = 1.0
    retries: Retries = field(default_factory=lambda: Retries(max_retries=0))
    timeout_seconds: float | None = None

    def __post_init__(self) -> None:
        if (self.max_queue is not None and self.max_queue < 1) or self.max_batch < 1:
            raise ValueError("max_queue and max_batch must be at least 1")
        if self.delay_seconds < 0:
            raise ValueError("delay_seconds must not be negative")


class _Request(Generic[T, R]):
    """A request on its way: what it carries, its retries, when it is due again."""

    __slots__ = ("due", "items", "payload", "retries")

    def __init__(self, items: Sequence[T], payload: R) -> None:
        self.items = items
        self.payload = payload
        self.retries = 0
        self.due = 0.0


class BatchSender(Generic[T, R]):
    """A bounded queue of `T` drained by one thread in batches, through a `Transport`."""

    def __init__(
        self,
        transport: Transport[T, R],
        options: BatchOptions,
        *,
        name: str,
        weight: Callable[[T], int] | None = None,
        clock: Clock = SYSTEM,
    ) -> None:
        self.transport = transport
        self.options = options
        self.name = name
        self._weight = weight
        self.clock = clock
        self._queue_room = float("inf") if options.max_queue is None else options.max_queue
        self._max_batch = options.max_batch
        self._reset()
        reset_after_fork(self._reset)

    def _reset(self) -> None:
        """Fresh state; also run in a forked child, whose parent owns the queue."""
        self._changed = threading.Condition()  # guards every field below; no call under it
        # `offer`'s items, appended without the lock; taken into the queue under it.
        self._inbox: deque[T] = deque()
        self._offered = False  # `offer` was used: an idle thread still looks at the inbox
        self._sleeping = False  # the thread waits for a notify, with no timeout
        self._queue: deque[T] = deque()
        self._queued_weight = 0
        self._batch_due = 0.0  # when the oldest queued item has waited long enough
        self._waiting: list[_Request[T, R]] = []  # failed transiently, due again later
        self._building: list[T] | None = None  # taken off the queue, not yet in requests
        self._taken: list[_Request[T, R]] = []  # the thread's to send now (one in its call)
        self._accepted = 0  # items accepted, ever
        self._accounted = 0  # of those, delivered or lost
        self._lost = 0
        self._lost_reported = 0  # lost items a flush already answered for
        self._flush_to = 0  # send without waiting for a full batch until this many accounted
        self._deadline: float | None = None  # set by close(): drain until then
        self._stopped = False  # the thread is done or given up on: nothing more is sent
        self._thread: threading.Thread | None = None

    # --- callers' threads ----------------------------------------------------------------
    def submit(self, item: T) -> semconv.Refusal | None:
        """Queue `item`; a refusal (full, or after shutdown) is the caller's to count.

        Refused items count as lost in the next `flush`'s answer.
        """
        weight = self._weight(item) if self._weight is not None else 1
        with self._changed:
            return self._accept(item, weight, self._queue)

    def offer(self, item: T) -> semconv.Refusal | None:
        """`submit` for an item of weight one, without the lock while a batch gathers.

        The first item of a batch, and one that fills it (which wakes the thread), go
        through the lock; those in between are appended to an inbox that the thread (idle,
        it looks every `delay_seconds`), `flush` and `close` take into the queue.
        `max_queue` may be passed by as many items as threads offer at that moment.
        """
        inbox = self._inbox
        waiting = len(inbox)
        if (
            waiting
            and waiting < self._max_batch
            and waiting + self._queued_weight < self._queue_room
            and not self._stopped
        ):
            inbox.append(item)
            return None
        with self._changed:
            self._offered = True
            return self._accept(item, 1, inbox if self.options.delay_seconds > 0 else self._queue)

    def _accept(self, item: T, weight: int, into: deque[T]) -> semconv.Refusal | None:
        """Queue `item` (lock held) into the queue, or the inbox; or say why not."""
        self._absorb()
        limit = self.options.max_queue
        if self._stopped:
            self._lost += 1  # a flush answers for refused items too
            return semconv.REFUSED_SHUTDOWN
        if limit is not None and self._queue and self._queued_weight + weight > limit:
            self._lost += 1
            return semconv.REFUSED_FULL
        first = not self._queue
        if first:
            self._batch_due = self.clock.now() + self.options.delay_seconds
        if into is self._queue:
            self._queue.append(item)
            self._queued_weight += weight
            self._accepted += 1
        else:
            into.append(item)
        if self._thread is None:
            self._thread = threading.Thread(
                target=run_suppressed(self._run), name=self.name, daemon=True
            )
            self._thread.start()
        # A thread idle without a timeout is woken by the first item of a batch; one that
        # looks at the inbox on a timer (after an `offer`) is left alone until then.
        if (
            (first and self._sleeping)
            or self._queued_weight >= self.options.max_batch
            or self.options.delay_seconds == 0
        ):
            self._changed.notify_all()
        return None

    def _absorb(self) -> None:
        """Take the inbox into the queue (lock held)."""
        inbox = self._inbox
        if not inbox:
            return
        if not self._queue and self._batch_due < self.clock.now():
            self._batch_due = self.clock.now()  # a straggler that no first offer announced
        moved = 0
        while inbox:
            self._queue.append(inbox.popleft())
            moved += 1
        self._queued_weight += moved
        self._accepted += moved

    def flush(self, timeout_seconds: float) -> tuple[bool, int]:
        """Send what is queued now, waiting at most `timeout_seconds`.

        Returns whether every item accepted before the call was accounted for (delivered
        or lost) in time, and how many items were lost since the last flush that answered.
        """
        with self._changed:
            self._absorb()
            target = self._accepted
            self._flush_to = max(self._flush_to, target)
            self._changed.notify_all()
            self._wait_until(lambda: self._accounted >= target or self._stopped, timeout_seconds)
            lost, self._lost_reported = self._lost - self._lost_reported, self._lost
            return self._accounted >= target, lost

    def close(self, deadline: float) -> None:
        """Drain until `deadline` (this sender's clock).

        What is queued goes now, waiting retries go at once, and items that arrive
        meanwhile are still taken.
        """
        with self._changed:
            self._absorb()
            if self._deadline is None or deadline < self._deadline:
                self._deadline = deadline
            now = self.clock.now()
            for request in self._waiting:
                request.due = min(request.due, now)
            if self._thread is None:  # never used: nothing to drain
                self._stopped = True
            self._changed.notify_all()

    def join(self, deadline: float) -> None:
        """Wait for the drain until `deadline`; whatever is left then is lost (`shutdown`)."""
        with self._changed:
            self._wait_until(lambda: self._stopped, deadline - self.clock.now())
            if not self._stopped:  # a call outlived the deadline: a little longer to report
                self._wait_until(lambda: self._stopped, JOIN_GRACE_SECONDS)
            self._absorb()
            left = [*(self._building or ()), *self._queue]
            for request in (*self._taken, *self._waiting):
                left.extend(request.items)
            self._building = None
            self._queue.clear()
            self._queued_weight = 0
            self._waiting.clear()
            self._taken.clear()  # the thread, if its call ever returns, counts nothing
            self._stopped = True
            self._changed.notify_all()
        if left:
            self._lose(left, "shutdown", "the drain deadline passed first")

    def shutdown(self, timeout_seconds: float) -> None:
        """`close` and `join` with a deadline `timeout_seconds` from now."""
        deadline = self.clock.now() + timeout_seconds
        self.close(deadline)
        self.join(deadline)

    # --- the sender thread ---------------------------------------------------------------
    def _run(self) -> None:
        while (batch := self._next()) is not None:
            self._build(batch)
            while (request := self._first()) is not None:
                self._attempt(request)

    def _next(self) -> list[T] | None:
        """Wait until a batch or a retry is due (retries go to `_taken`); None when done."""
        with self._changed:
            while True:
                if self._stopped:
                    return None
                self._absorb()
                now = self.clock.now()
                due = [r for r in self._waiting if r.due <= now]
                draining = self._deadline is not None
                send_queue = bool(self._queue) and (
                    draining
                    or self._queued_weight >= self.options.max_batch
                    or now >= self._batch_due
                    or self._accepted - len(self._queue) < self._flush_to
                )
                if due or send_queue:
                    self._waiting = [r for r in self._waiting if r.due > now]
                    self._taken.extend(due)
                    self._building = self._take() if send_queue else []
                    return self._building
                if draining and not self._queue and not self._waiting:
                    self._stopped = True
                    self._changed.notify_all()
                    return None
                wakeups = [r.due for r in self._waiting]
                if self._queue:
                    wakeups.append(self._batch_due)
                elif self._offered:  # offers go to the inbox unannounced: look again then
                    wakeups.append(now + self.options.delay_seconds)
                self._sleeping = not wakeups
                self.clock.wait(self._changed, min(wakeups) - now if wakeups else None)
                self._sleeping = False

    def _take(self) -> list[T]:
        """One batch off the queue (at least one item, up to `max_batch` in weight)."""
        batch: list[T] = []
        weight = 0
        while self._queue and (not batch or weight < self.options.max_batch):
            item = self._queue.popleft()
            item_weight = self._weight(item) if self._weight is not None else 1
            weight += item_weight
            self._queued_weight -= item_weight
            batch.append(item)
        if self._queue:
            self._batch_due = self.clock.now() + self.options.delay_seconds
        return batch

    def _build(self, batch: list[T]) -> None:
        """The batch's requests, queued to `_taken`; a failure to build loses the batch."""
        if not batch:
            return
        error = None
        try:
            requests = [_Request(i, p) for i, p in self.transport.requests(batch)]
        except Exception as exc:  # a bug in building requests must not kill the thread
            logger.exception("tracefact: %s could not build its requests", self.name)
            requests, error = [], f"{type(exc).__name__}: {exc}"
        with self._changed:
            if self._building is not batch:
                return  # `join` counted it
            self._building = None
            self._taken.extend(requests)
        if error is not None:
            self._lose(batch, "failed", error)

    def _first(self) -> _Request[T, R] | None:
        with self._changed:
            return self._taken[0] if self._taken else None

    def _claim(self, request: _Request[T, R]) -> bool:
        """Take `request` back from `_taken`; False when `join` already counted it lost."""
        with self._changed:
            if not self._taken or self._taken[0] is not request:
                return False
            self._taken.pop(0)
            return True

    def _remaining(self) -> float | None:
        with self._changed:
            deadline = self._deadline
        return None if deadline is None else deadline - self.clock.now()

    def _attempt(self, request: _Request[T, R]) -> None:
        """Send `request` once; deliver it, lose it, or queue its retry."""
        remaining = self._remaining()
        if remaining is not None and remaining <= 0:
            if self._claim(request):
                self._lose(request.items, "shutdown", "the drain deadline passed first")
            return
        timeout = self.options.timeout_seconds
        if remaining is not None:
            timeout = remaining if timeout is None else min(timeout, remaining)
        try:
            attempt = self.transport.send(request.payload, timeout)
        except Exception as exc:
            logger.exception("tracefact: %s failed to send", self.name)
            attempt = failed_attempt(exc)
        if not self._claim(request):
            return
        if attempt.ok:
            self.transport.delivered(request.items, attempt)
            self._count(len(request.items), lost=0)
            return
        remaining = self._remaining()
        delay = self.options.retries.delay(
            request.retries, attempt.transient, attempt.retry_after, remaining
        )
        if delay is None:
            out_of_time = attempt.transient and remaining is not None and remaining <= 0
            retried = f" (after {request.retries} retries)" if request.retries else ""
            self._lose(
                request.items, "shutdown" if out_of_time else "failed", attempt.error + retried
            )
            return
        request.retries += 1
        self.transport.retrying(request.items, request.retries, attempt.error)
        with self._changed:
            stopped = self._stopped
            if not stopped:
                request.due = self.clock.now() + delay
                self._waiting.append(request)
                self._changed.notify_all()
        if stopped:  # `join` gave up meanwhile, without this request
            self._lose(request.items, "shutdown", attempt.error)

    # --- outcomes (outside the lock: the owner's callbacks may log and count) -------------
    def _lose(self, items: Sequence[T], reason: Loss, error: str) -> None:
        self.transport.lost(items, reason, error)
        self._count(len(items), lost=len(items))

    def _count(self, accounted: int, lost: int) -> None:
        with self._changed:
            self._accounted += accounted
            self._lost += lost
            self._changed.notify_all()

    def _wait_until(self, done: Callable[[], bool], timeout: float) -> None:
        """Wait (lock held) until `done()` or `timeout` seconds of this sender's clock."""
        deadline = self.clock.now() + timeout
        while not done():
            left = deadline - self.clock.now()
            if left <= 0:
                return
            self.clock.wait(self._changed, left)
