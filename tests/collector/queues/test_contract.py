"""The request-queue contract, the same cases on every backend.

A queue holds what the collector promised to forward: `put` at the bound refuses with a
retry hint, `get` hands each entry to one consumer, `ack` forgets it, and on the durable
backends an entry whose consumer died comes again with its delivery counted.

`opener` opens the test's one store again: another connection to the SQLite file or the
Redis stream (another process, as it were), and for `memory` the same queue, the only
one a process has.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.collector.queues.backends import (
    Opener,
    memory_opener,
    names,
    redis_opener,
    request,
    sqlite_opener,
)
from tests.collector.queues.redis_server import RedisServer
from tracefact.collector.queue import QueueFull, RequestQueue


def _opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    opened: list[RequestQueue] = []
    if request.param == "memory":
        base = memory_opener()
    elif request.param == "sqlite":
        base = sqlite_opener(tmp_path / "queue" / "requests.db")
    else:
        server = request.getfixturevalue("redis_server")
        assert isinstance(server, RedisServer)
        base = redis_opener(server.url)

    def open_queue(**options: float) -> RequestQueue:
        queue = base(**options)
        opened.append(queue)
        return queue

    yield open_queue
    for queue in opened:
        queue.close()


@pytest.fixture(params=["memory", "sqlite", "redis"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    yield from _opener(request, tmp_path)


@pytest.fixture(params=["sqlite", "redis"])
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    yield from _opener(request, tmp_path)


def test_a_request_comes_back_whole_once_and_is_forgotten_when_acknowledged(opener: Opener) -> None:
    queue = opener()
    assert queue.unavailable() is None  # its store is there: `/readyz` may say ready
    sent = request(1, spans=3)
    before = time.time()
    queue.put(sent)
    assert queue.depth() == 1

    [entry] = queue.get(10, 1.0)
    assert entry.request == sent
    assert entry.deliveries == 1
    assert before - 1 <= entry.stored_at <= time.time() + 1  # Redis's clock is its own
    assert queue.get(10, 0.0) == []  # handed out: nobody else gets it
    assert queue.depth() == 1  # but still stored until acknowledged

    queue.ack(entry.id)
    assert queue.depth() == 0
    assert queue.get(10, 0.0) == []


def test_get_hands_out_in_order_at_most_max_entries(opener: Opener) -> None:
    queue = opener()
    for number in range(5):
        queue.put(request(number))
    assert queue.get(0, 0.0) == [] and queue.get(-1, 0.0) == []  # no room: nothing taken
    first = queue.get(3, 1.0)
    rest = queue.get(10, 1.0)
    assert [names(e.request) for e in first + rest] == [[f"span-{n}-0"] for n in range(5)]
    assert len(first) == 3


def test_a_waiting_get_wakes_up_on_a_put(opener: Opener) -> None:
    consumer, producer = opener(), opener()
    got: list[list[str]] = []
    reader = threading.Thread(
        target=lambda: got.extend(names(e.request) for e in consumer.get(1, 10.0))
    )
    reader.start()
    time.sleep(0.2)
    producer.put(request(7))
    reader.join(15)
    assert got == [["span-7-0"]]


def test_put_at_the_bound_raises_queue_full_with_a_retry_hint_until_an_ack(opener: Opener) -> None:
    queue = opener(max_entries=3)
    for number in range(3):
        queue.put(request(number))
    with pytest.raises(QueueFull) as full:
        queue.put(request(3))
    assert full.value.retry_after_seconds > 0
    assert queue.depth() == 3

    [entry] = queue.get(1, 1.0)
    with pytest.raises(QueueFull):  # handed out is still stored: still full
        queue.put(request(3))
    queue.ack(entry.id)
    queue.put(request(3))
    assert queue.depth() == 3


def test_an_entry_of_a_consumer_that_died_comes_again_with_its_delivery_counted(
    durable: Opener,
) -> None:
    dead = durable(lease_seconds=0.5)
    dead.put(request(1))
    [taken] = dead.get(1, 1.0)
    dead.close()  # hands the entry back, as a stopped process does, never acknowledging

    survivor = durable(lease_seconds=0.5)
    again = survivor.get(1, 10.0)
    assert [e.id for e in again] == [taken.id]
    assert again[0].deliveries == 2
    assert again[0].request == taken.request
    assert again[0].stored_at == pytest.approx(taken.stored_at)
    survivor.ack(taken.id)
    assert survivor.depth() == 0


def test_a_closed_consumer_hands_back_what_it_held_without_waiting_for_the_lease(
    durable: Opener,
) -> None:
    """A consumer stopped mid-work (SIGTERM) lets the next one start on it right away."""
    stopping = durable(lease_seconds=60)
    stopping.put(request(1))
    stopping.put(request(2))
    first, second = stopping.get(2, 1.0)
    stopping.ack(first.id)
    stopping.close()

    survivor = durable(lease_seconds=60)
    again = survivor.get(2, 5.0)  # a tenth of the lease: only the hand-back explains it
    assert [(e.id, e.deliveries) for e in again] == [(second.id, 2)]
    survivor.ack(second.id)
    assert survivor.depth() == 0


def test_an_entry_held_by_a_live_consumer_is_not_handed_out_again(durable: Opener) -> None:
    holder, other = durable(lease_seconds=0.6), durable(lease_seconds=0.6)
    holder.put(request(1))
    [taken] = holder.get(1, 1.0)
    # Three lease times: only the holder's renewals keep the entry from the other consumer.
    assert other.get(1, 1.8) == []
    holder.ack(taken.id)
    assert other.get(1, 0.0) == []
    assert other.depth() == 0


def test_stored_requests_outlive_the_queue_object(durable: Opener) -> None:
    first = durable()
    first.put(request(1))
    first.put(request(2))
    first.close()

    reopened = durable()
    assert reopened.depth() == 2
    assert [names(e.request) for e in reopened.get(10, 1.0)] == [["span-1-0"], ["span-2-0"]]


def test_concurrent_producers_and_consumers_deliver_every_request_once(opener: Opener) -> None:
    producers, consumers = [opener() for _ in range(3)], [opener() for _ in range(2)]
    per_producer = 40
    seen: list[str] = []
    lock = threading.Lock()
    done = threading.Event()

    def produce(queue: RequestQueue, offset: int) -> None:
        for number in range(offset, offset + per_producer):
            queue.put(request(number))

    def consume(queue: RequestQueue) -> None:
        while not done.is_set():
            for entry in queue.get(7, 0.2):
                with lock:
                    seen.extend(names(entry.request))
                queue.ack(entry.id)

    threads = [
        threading.Thread(target=produce, args=(q, i * per_producer))
        for i, q in enumerate(producers)
    ] + [threading.Thread(target=consume, args=(q,)) for q in consumers]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while len(seen) < 3 * per_producer and time.monotonic() < deadline:
        time.sleep(0.05)
    done.set()
    for thread in threads:
        thread.join(10)
    assert sorted(seen) == sorted(f"span-{n}-0" for n in range(3 * per_producer))
    assert producers[0].depth() == 0


def test_the_memory_queue_never_hands_an_entry_out_twice() -> None:
    queue = memory_opener()()
    queue.put(request(1))
    [taken] = queue.get(1, 1.0)
    assert queue.get(1, 0.2) == []  # not acknowledged, and still not handed out again
    assert queue.depth() == 1
    queue.ack(taken.id)
    assert queue.durable is False and queue.depth() == 0
