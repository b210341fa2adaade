"""The one batching sender under the export stage, the sinks and the forwarder.

Time is a `ManualClock`: a test says "a second later" and sees what that causes, so
batch delays, retry schedules and the drain deadline are checked without sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from tests.waiting import eventually
from tracefact._batching import BatchOptions, BatchSender, Loss, Transport
from tracefact._clock import ManualClock
from tracefact._retry import Attempt, Backoff, Retries


class Recorder(Transport[str, tuple[str, ...]]):
    """One request per batch; answers from `script` (then ok), or waits for `release`."""

    def __init__(self, script: Sequence[Attempt] = ()) -> None:
        self.script = list(script)
        self.calls: list[tuple[str, ...]] = []
        self.timeouts: list[float | None] = []
        self.delivered_items: list[str] = []
        self.lost_items: list[tuple[str, Loss]] = []
        self.hang = threading.Event()  # set: calls wait for `release`
        self.release = threading.Event()
        self._lock = threading.Lock()

    def requests(self, batch: list[str]) -> Iterable[tuple[Sequence[str], tuple[str, ...]]]:
        return [(batch, tuple(batch))]

    def send(self, request: tuple[str, ...], timeout: float | None) -> Attempt:
        with self._lock:
            self.calls.append(request)
            self.timeouts.append(timeout)
            answer = self.script.pop(0) if self.script else Attempt(True)
        if self.hang.is_set():
            self.release.wait(30)
        return answer

    def delivered(self, items: Sequence[str], attempt: Attempt) -> None:
        with self._lock:
            self.delivered_items.extend(items)

    def lost(self, items: Sequence[str], reason: Loss, error: str) -> None:
        with self._lock:
            self.lost_items.extend((item, reason) for item in items)


def sender(
    transport: Recorder, clock: ManualClock, **options: object
) -> BatchSender[str, tuple[str, ...]]:
    return BatchSender(transport, BatchOptions(**options), name="test-sender", clock=clock)  # type: ignore[arg-type]


def test_a_batch_waits_for_its_delay_or_for_a_full_batch() -> None:
    clock, transport = ManualClock(), Recorder()
    s = sender(transport, clock, max_batch=3, delay_seconds=1.0)
    s.submit("a")
    s.submit("b")
    clock.advance(0.5)
    s.submit("c")  # the batch is full: it goes now, at 0.5 s
    assert eventually(lambda: transport.calls == [("a", "b", "c")])
    s.submit("d")
    clock.advance(0.99)
    clock.advance(0.02)  # a second after "d": it goes alone
    assert eventually(lambda: transport.calls == [("a", "b", "c"), ("d",)])
    s.shutdown(5)
    assert transport.delivered_items == ["a", "b", "c", "d"] and transport.lost_items == []


def test_an_idle_sender_wakes_for_the_delay_of_a_new_batch_on_the_system_clock() -> None:
    """Idle after a batch, the thread waits with no deadline: a new item must give it one."""
    transport = Recorder()
    s = BatchSender(transport, BatchOptions(max_batch=100, delay_seconds=0.01), name="real")
    s.submit("a")
    assert eventually(lambda: transport.calls == [("a",)])
    assert eventually(lambda: transport.delivered_items == ["a"])
    s.submit("b")  # the thread is idle now, waiting without a deadline
    assert eventually(lambda: transport.calls == [("a",), ("b",)])
    s.shutdown(5)


def test_refusals_are_named_and_a_flush_answers_for_them() -> None:
    clock, transport = ManualClock(), Recorder()
    s = sender(transport, clock, max_queue=2, max_batch=10, delay_seconds=60)
    assert [s.submit(x) for x in "abc"] == [None, None, "full"]
    assert s.flush(5) == (True, 1)  # both queued went; one was refused since
    assert s.flush(5) == (True, 0)
    s.shutdown(5)
    assert s.submit("d") == "shutdown"


def test_a_retry_waits_on_its_own_schedule_without_holding_up_the_next_batch() -> None:
    clock = ManualClock()
    transport = Recorder([Attempt(False, True, "HTTP 503", retry_after=5.0)])
    s = sender(transport, clock, delay_seconds=0, retries=Retries(3, Backoff(1.0, 10.0)))
    s.submit("first")
    assert eventually(lambda: len(transport.calls) == 1)
    s.submit("second")  # goes while "first" waits for its retry
    assert eventually(lambda: transport.delivered_items == ["second"])
    clock.advance(5.0)  # the server's Retry-After
    assert eventually(lambda: transport.delivered_items == ["second", "first"])
    assert transport.calls == [("first",), ("second",), ("first",)]
    s.shutdown(5)


def test_a_permanent_failure_is_lost_as_failed_not_retried() -> None:
    clock = ManualClock()
    transport = Recorder([Attempt(False, False, "HTTP 400")])
    s = sender(transport, clock, delay_seconds=0, retries=Retries(None))
    s.submit("a")
    assert s.flush(5) == (True, 1)
    assert transport.lost_items == [("a", "failed")] and len(transport.calls) == 1
    s.shutdown(5)


def test_the_drain_sends_waiting_retries_at_once_with_calls_bounded_by_the_deadline() -> None:
    clock = ManualClock()
    transport = Recorder([Attempt(False, True, "HTTP 503", retry_after=600.0)])
    s = sender(transport, clock, delay_seconds=0, retries=Retries(None, Backoff(600, 600)))
    s.submit("a")
    assert eventually(lambda: len(transport.calls) == 1)
    s.close(clock.now() + 10)  # ten minutes of backoff left: the drain does not wait for it
    assert eventually(lambda: transport.delivered_items == ["a"])
    assert transport.timeouts == [None, 10.0]
    s.join(clock.now() + 10)


def test_a_call_still_under_way_at_the_deadline_is_abandoned_and_counted_once() -> None:
    clock, transport = ManualClock(), Recorder()
    transport.hang.set()
    s = sender(transport, clock, delay_seconds=0)
    s.submit("a")
    assert eventually(lambda: transport.calls == [("a",)])
    s.submit("b")  # queued behind the hanging call
    deadline = clock.now() + 2
    s.close(deadline)
    joining = threading.Thread(target=s.join, args=(deadline,))
    joining.start()
    clock.advance(2)  # the deadline
    assert eventually(lambda: clock.advance(0.3) or not joining.is_alive())  # and the grace
    assert sorted(transport.lost_items) == [("a", "shutdown"), ("b", "shutdown")]
    transport.release.set()  # the abandoned call returns, to a sender that counted it
    assert s.flush(5) == (True, 2)
    assert transport.delivered_items == [] and len(transport.lost_items) == 2


def test_offered_items_batch_like_submitted_ones_and_count_the_same() -> None:
    clock, transport = ManualClock(), Recorder()
    s = sender(transport, clock, max_queue=4, max_batch=3, delay_seconds=1.0)
    assert [s.offer(x) for x in "ab"] == [None, None]
    clock.advance(0.5)
    assert s.offer("c") is None  # the batch is full: it goes now
    assert eventually(lambda: transport.calls == [("a", "b", "c")])
    assert [s.offer(x) for x in "defgh"] == [None, None, None, None, "full"]
    assert s.flush(5) == (True, 1)
    s.shutdown(5)
    assert s.offer("i") == "shutdown"
    assert transport.delivered_items == list("abcdefg") and transport.lost_items == []


def test_an_item_after_an_idle_spell_leaves_after_its_delay_without_a_flush() -> None:
    """Real time: the idle thread waits without a timeout, so the item itself must wake it."""
    transport = Recorder()
    s: BatchSender[str, tuple[str, ...]] = BatchSender(
        transport, BatchOptions(max_batch=100, delay_seconds=0.05), name="test-sender"
    )
    for item, offered in (("a", False), ("b", False), ("c", True), ("d", True)):
        if offered:
            s.offer(item)
        else:
            s.submit(item)
        assert eventually(lambda item=item: item in transport.delivered_items)  # type: ignore[misc]
    s.shutdown(5)
    assert transport.delivered_items == ["a", "b", "c", "d"]
