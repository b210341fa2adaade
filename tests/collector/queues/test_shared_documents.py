"""Retrieved documents shared through Redis: one worker's retriever span grounds another's."""

from __future__ import annotations

import time

from tests.collector.queues.redis_server import RedisServer
from tracefact.collector.shared_documents import SharedDocumentStore


def test_documents_added_by_one_worker_are_read_by_another(redis_server: RedisServer) -> None:
    first = SharedDocumentStore(redis_server.url, max_documents=3)
    second = SharedDocumentStore(redis_server.url, max_documents=3)
    first.add(7, ["Paris is the capital of France.", "ünïcode ✓"])
    first.add(7, ["a third", "a fourth, beyond max_documents"])
    first.add(8, ["another trace"])

    assert second.documents(7) == ["Paris is the capital of France.", "ünïcode ✓", "a third"]
    assert second.documents(8) == ["another trace"]
    assert second.documents(9) == []
    first.close()
    second.close()


def test_a_retriever_span_routed_twice_does_not_double_its_documents(
    redis_server: RedisServer,
) -> None:
    store = SharedDocumentStore(redis_server.url)
    store.add(5, ["one", "two"])
    store.add(5, ["one", "two"])  # its entry was handed out again after a crash
    assert SharedDocumentStore(redis_server.url).documents(5) == ["one", "two"]
    store.close()


def test_documents_outlive_the_worker_that_added_them(redis_server: RedisServer) -> None:
    dead = SharedDocumentStore(redis_server.url)
    dead.add(1, ["kept in redis"])
    dead.close()
    assert SharedDocumentStore(redis_server.url).documents(1) == ["kept in redis"]


def test_documents_expire_with_their_time_to_live(redis_server: RedisServer) -> None:
    store = SharedDocumentStore(redis_server.url, ttl_seconds=0.2)
    store.add(1, ["short-lived"])
    other = SharedDocumentStore(redis_server.url)
    time.sleep(0.5)
    assert other.documents(1) == []
    store.close()
    other.close()


def test_while_redis_is_down_a_worker_still_sees_its_own_documents(
    redis_server: RedisServer,
) -> None:
    store = SharedDocumentStore(redis_server.url, socket_timeout_seconds=1.0)
    redis_server.stop()
    store.add(1, ["local only"])
    assert store.documents(1) == ["local only"]
    store.close()
