"""Retrieved documents and tool results on a shelf beside the queue, shared and kept.

The same cases on Redis and on the SQLite file; a store opened again stands for another
worker, or for the process that restarted.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.collector.queues.redis_server import RedisServer
from tracefact import semconv
from tracefact.collector.shared_documents import RedisShelf, SharedDocumentStore, SqliteShelf
from tracefact.pipeline.reading import SpanReader
from tracefact.pipeline.verdict import Record

Opener = Callable[..., SharedDocumentStore]


@pytest.fixture(params=["sqlite", "redis"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    opened: list[SharedDocumentStore] = []

    def open_store(ttl_seconds: float = 600.0, **bounds: Any) -> SharedDocumentStore:
        if request.param == "sqlite":
            shelf: Any = SqliteShelf(tmp_path / "queue.db", ttl_seconds=ttl_seconds)
        else:
            server = request.getfixturevalue("redis_server")
            assert isinstance(server, RedisServer)
            shelf = RedisShelf(server.url, ttl_seconds=ttl_seconds, socket_timeout_seconds=1.0)
        store = SharedDocumentStore(shelf, **bounds)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


def test_documents_added_by_one_consumer_are_read_by_another(opener: Opener) -> None:
    first, second = opener(max_documents=3), opener(max_documents=3)
    first.add(7, ["Paris is the capital of France.", "ünïcode ✓"])
    first.add(7, ["a third", "a fourth, beyond max_documents"])
    first.add(8, ["another trace"])

    assert second.documents(7) == ["Paris is the capital of France.", "ünïcode ✓", "a third"]
    assert second.documents(8) == ["another trace"]
    assert second.documents(9) == []


def test_a_retriever_span_routed_twice_does_not_double_its_documents(opener: Opener) -> None:
    store = opener()
    store.add(5, ["one", "two"])
    store.add(5, ["one", "two"])  # its entry was handed out again after a crash
    assert opener().documents(5) == ["one", "two"]


def test_a_lone_surrogate_is_shared_replaced_and_the_shelf_keeps_working(
    opener: Opener,
) -> None:
    r"""OTLP/JSON's "\ud800" decodes to a lone surrogate, which UTF-8 cannot store."""
    store = opener()
    store.add(3, ["half a pair: \ud800 here", "fine"])
    store.add(4, ["the next trace"])

    assert opener().documents(3) == ["half a pair: ? here", "fine"]
    assert opener().documents(4) == ["the next trace"]


def test_documents_outlive_the_consumer_that_added_them(opener: Opener) -> None:
    dead = opener()
    dead.add(1, ["kept"])
    dead.close()
    assert opener().documents(1) == ["kept"]


def test_documents_expire_with_their_time_to_live(opener: Opener) -> None:
    opener(ttl_seconds=0.2).add(1, ["short-lived"])
    time.sleep(0.5)
    assert opener(ttl_seconds=0.2).documents(1) == []


def test_the_sqlite_shelf_keeps_its_bytes_bound_over_every_process(tmp_path: Path) -> None:
    path = tmp_path / "queue.db"
    first, second = SqliteShelf(path, max_bytes=100), SqliteShelf(path, max_bytes=100)
    first.append(1, ["a" * 40, "b" * 40])
    second.append(2, ["c" * 40])  # 120 bytes: the oldest document goes
    assert first.read(1) == ["b" * 40] and first.read(2) == ["c" * 40]
    second.append(3, ["é" * 30])  # 60 bytes in UTF-8
    assert (first.read(1), second.read(2), first.read(3)) == ([], ["c" * 40], ["é" * 30])
    first.close()
    second.close()
    reopened = SqliteShelf(path, max_bytes=100)
    reopened.append(4, ["d" * 10])  # 110 bytes: the size was kept in the file
    assert (reopened.read(2), reopened.read(4)) == ([], ["d" * 10])
    reopened.close()


def test_the_sqlite_shelf_counts_what_an_earlier_version_stored(tmp_path: Path) -> None:
    path = tmp_path / "queue.db"
    with sqlite3.connect(path) as db:  # the table as versions without a bound wrote it
        db.execute("CREATE TABLE documents (trace_id TEXT, added REAL, text TEXT)")
        db.execute("INSERT INTO documents VALUES (?, ?, ?)", (f"{1:032x}", time.time(), "a" * 90))
    db.close()
    shelf = SqliteShelf(path, max_bytes=100)
    shelf.append(2, ["b" * 20])
    assert (shelf.read(1), shelf.read(2)) == ([], ["b" * 20])
    shelf.close()


def test_while_redis_is_down_a_worker_still_sees_its_own_documents(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = SharedDocumentStore(RedisShelf(redis_server.url, socket_timeout_seconds=1.0))
    redis_server.stop()
    store.add(1, ["local only"])
    assert store.documents(1) == ["local only"]
    assert "redis unreachable" in caplog.text
    store.close()


def test_a_tool_result_remembered_by_one_consumer_grounds_an_llm_span_on_another(
    opener: Opener,
) -> None:
    tool = {
        semconv.GEN_AI_OPERATION_NAME: "execute_tool",
        semconv.GEN_AI_TOOL_NAME: "facts",
        semconv.GEN_AI_TOOL_CALL_ID: "call_1",
        semconv.GEN_AI_TOOL_CALL_RESULT: '{"height": "330 metres"}',
    }
    SpanReader(store=opener()).remember(3, "tool", tool, [], 5)
    llm = {semconv.INPUT_VALUE: "How tall?", semconv.OUTPUT_VALUE: "330 metres."}
    reading = SpanReader(store=opener()).read(Record(3, 0x11, None, "chat", llm, end_time=10))
    assert reading.case is not None and reading.case.contexts == ["height: 330 metres"]
    assert (reading.contexts_source, reading.tool_calls) == ("tool", ("call_1",))
