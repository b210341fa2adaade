"""What only the Redis queue does: outages, Redis restarts, shared bounds, foreign entries."""

from __future__ import annotations

import pytest
import redis

from tests.collector.harness import wait_until
from tests.collector.queues.backends import names, request
from tests.collector.queues.redis_server import RedisServer
from tracefact.collector.queue import QueueFull, QueueUnavailable
from tracefact.collector.redis_queue import RedisQueue


def test_while_redis_is_down_put_asks_to_retry_and_get_returns_nothing(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    queue = RedisQueue(redis_server.url, socket_timeout_seconds=1.0)
    queue.put(request(1))
    assert queue.depth() == 1
    assert queue.unavailable() is None
    redis_server.stop()

    with pytest.raises(QueueUnavailable) as refused:
        queue.put(request(2))
    assert queue.depth() == 1  # the last length read: a metrics scrape does not fail
    assert isinstance(refused.value, QueueFull)  # a receiver answers it like a full queue
    assert refused.value.retry_after_seconds > 0
    assert queue.get(10, 0.3) == []
    assert "unreachable" in caplog.text
    assert str(queue.unavailable()).startswith("redis unreachable: ")

    redis_server.start()  # its append-only file brings the stored request back
    # Asked without any put or get: a probe alone sees Redis back (within a second).
    assert wait_until(lambda: queue.unavailable() is None, timeout=5)
    [entry] = queue.get(10, 2.0)
    assert names(entry.request) == ["span-1-0"]
    queue.ack(entry.id)
    queue.put(request(3))
    assert queue.depth() == 1
    assert "reachable again" in caplog.text
    queue.close()


def test_an_ack_lost_in_an_outage_is_made_once_redis_is_back(
    redis_server: RedisServer,
) -> None:
    queue = RedisQueue(redis_server.url, lease_seconds=0.5, socket_timeout_seconds=1.0)
    queue.put(request(1))
    [entry] = queue.get(1, 1.0)
    redis_server.stop()
    queue.ack(entry.id)  # cannot reach Redis: no exception, the acknowledgement waits
    redis_server.start()

    assert queue.get(1, 2.0) == []  # acknowledged first: not handed out again
    assert queue.depth() == 0
    queue.close()


def test_the_bound_is_shared_by_every_collector_on_the_stream(redis_server: RedisServer) -> None:
    first = RedisQueue(redis_server.url, max_entries=2)
    second = RedisQueue(redis_server.url, max_entries=2)
    first.put(request(1))
    second.put(request(2))
    with pytest.raises(QueueFull):
        first.put(request(3))
    with pytest.raises(QueueFull):
        second.put(request(3))
    first.close()
    second.close()


def test_a_foreign_entry_on_the_stream_is_handed_on_empty(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    queue = RedisQueue(redis_server.url, stream="shared")
    client = redis.Redis.from_url(redis_server.url)
    client.xadd("shared", {"p": b"\xff\xff"})
    client.close()
    [entry] = queue.get(1, 1.0)
    assert names(entry.request) == []
    assert "is not an OTLP request" in caplog.text
    queue.close()


@pytest.mark.parametrize(
    "options", [{"max_entries": 0}, {"lease_seconds": 0}, {"socket_timeout_seconds": 0}]
)
def test_bad_settings_are_refused_naming_them(options: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(options))):
        RedisQueue("redis://127.0.0.1:1/0", **options)  # type: ignore[arg-type]
