"""Retrieved documents kept beside a durable queue, for every consumer and every restart.

With a durable queue, a trace's retriever span and its LLM span can sit in two requests
that two consumers take (Redis), or that one consumer takes before and after a crash
(SQLite: the retriever's request left and was acknowledged, the LLM span's is handed out
again). Each consumer still reads spans with the SDK's `DocumentStore`, but this one
also writes every trace's documents to a shelf beside the queue (a Redis list per trace,
or a table in the SQLite file, kept for a time to live) and reads them from there: the
LLM span, held for the window wherever it is, meets the documents of a retriever span
routed by another consumer, or by this one before it died.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from tracefact._imports import import_extra
from tracefact.conventions import DocumentStore
from tracefact.scrubbing import valid_utf8

logger = logging.getLogger(__name__)
_BYTES = "length(CAST(text AS BLOB))"
"""A stored text's size in bytes (UTF-8, the file's encoding)."""


class Shelf(Protocol):
    """Where a trace's documents are shared; a failure is logged there, never raised."""

    def append(self, trace_id: int, texts: Sequence[str]) -> None: ...

    def read(self, trace_id: int) -> list[str] | None:
        """The trace's documents in the order added; None when the shelf is unreachable."""
        ...

    def close(self) -> None: ...


class SharedDocumentStore(DocumentStore):
    """A `DocumentStore` whose documents are on a shelf too, for every consumer.

    Args:
        shelf: `RedisShelf` or `SqliteShelf`.
        **bounds: the local store's bounds (`DocumentStore`); the size of one document
            bounds what goes on the shelf as well.
    """

    def __init__(self, shelf: Shelf, **bounds: Any) -> None:
        super().__init__(**bounds)
        self.shelf = shelf

    def add(self, trace_id: int, texts: Sequence[str]) -> None:
        super().add(trace_id, texts)
        # A shelf holds UTF-8, which a lone surrogate (a JSON "\ud800" decoded) is not.
        fits = [t for t in texts if len(t.encode("utf-8", "surrogatepass")) <= self.max_bytes]
        kept = [valid_utf8(text) for text in fits]
        if kept:  # what the shelf cannot take, this consumer's own LLM spans still see
            self.shelf.append(trace_id, kept)

    def documents(self, trace_id: int) -> list[str]:
        stored = self.shelf.read(trace_id)
        if stored is None:
            return super().documents(trace_id)
        # A retriever span handed out again (its consumer died) adds its documents twice.
        return list(dict.fromkeys(stored))[: self.max_documents]

    def close(self) -> None:
        self.shelf.close()


class RedisShelf:
    """A Redis list per trace, ``{key_prefix}{trace id in hex}``, with a time to live."""

    def __init__(
        self,
        url: str,
        *,
        key_prefix: str = "tracefact:documents:",
        ttl_seconds: float = 600.0,
        max_documents: int = 256,
        socket_timeout_seconds: float = 5.0,
    ) -> None:
        redis = import_extra("redis", "redis")
        self._errors: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError)
        # Any: redis-py annotates its sync and async clients alike (X | Awaitable[X]).
        self._redis: Any = redis.Redis.from_url(
            url,
            socket_timeout=socket_timeout_seconds,
            socket_connect_timeout=socket_timeout_seconds,
        )
        self._prefix = key_prefix
        self._ttl_ms = max(1, int(ttl_seconds * 1000))
        self._max_documents = max_documents

    def append(self, trace_id: int, texts: Sequence[str]) -> None:
        key = self._key(trace_id)
        try:
            pipe = self._redis.pipeline(transaction=True)
            pipe.rpush(key, *texts)
            pipe.ltrim(key, 0, 2 * self._max_documents - 1)  # room for one redelivery
            pipe.pexpire(key, self._ttl_ms)
            pipe.execute()
        except self._errors as exc:
            logger.warning("retrieved documents not shared (redis unreachable): %s", exc)

    def read(self, trace_id: int) -> list[str] | None:
        try:
            stored = self._redis.lrange(self._key(trace_id), 0, -1)
        except self._errors as exc:
            logger.warning("shared documents not read (redis unreachable): %s", exc)
            return None
        return [text.decode("utf-8", "surrogatepass") for text in stored]

    def close(self) -> None:
        self._redis.close()

    def _key(self, trace_id: int) -> str:
        return f"{self._prefix}{trace_id:032x}"


class SqliteShelf:
    """A table in the queue's SQLite file: documents survive the process with its requests.

    Written with `synchronous=NORMAL`: a power loss may lose the last documents (their LLM
    spans are then judged without them), never a request. ``max_bytes`` bounds the text
    kept (UTF-8), over every process sharing the file: past it the oldest documents go.
    """

    def __init__(
        self, path: str | Path, *, ttl_seconds: float = 600.0, max_bytes: int = 64 * 1024 * 1024
    ) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")
        self._ttl = ttl_seconds
        self._max_bytes = max_bytes
        self._lock = threading.Lock()  # one connection shared by the engine's threads
        self._db = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=10.0
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(
            "CREATE TABLE IF NOT EXISTS documents "
            "(trace_id TEXT NOT NULL, added REAL NOT NULL, text TEXT NOT NULL);"
            "CREATE INDEX IF NOT EXISTS documents_trace ON documents (trace_id);"
            "CREATE INDEX IF NOT EXISTS documents_added ON documents (added);"
            # The bytes the table holds, kept in the writers' transactions: summing the
            # table on every write would read all of it.
            "CREATE TABLE IF NOT EXISTS documents_size (bytes INTEGER NOT NULL);"
            "BEGIN IMMEDIATE;"
            f"INSERT INTO documents_size SELECT COALESCE(SUM({_BYTES}), 0) FROM documents "
            "WHERE NOT EXISTS (SELECT 1 FROM documents_size);"
            "COMMIT;"
        )

    def append(self, trace_id: int, texts: Sequence[str]) -> None:
        now = time.time()
        key = f"{trace_id:032x}"
        try:
            with self._lock:
                self._db.execute("BEGIN IMMEDIATE")
                self._drop("added < ?", now - self._ttl)
                self._db.executemany(
                    "INSERT INTO documents (trace_id, added, text) VALUES (?, ?, ?)",
                    [(key, now, text) for text in texts],
                )
                added = sum(len(text.encode("utf-8")) for text in texts)
                self._db.execute("UPDATE documents_size SET bytes = bytes + ?", (added,))
                (size,) = self._db.execute("SELECT bytes FROM documents_size").fetchone()
                if size > self._max_bytes:
                    self._drop_oldest(size - self._max_bytes)
                self._db.execute("COMMIT")
        except sqlite3.Error as exc:  # disk full, locked too long
            logger.warning("retrieved documents not kept in %s: %s", "sqlite", exc)
            self._rollback()

    def _drop(self, where: str, *args: Any) -> None:
        """Delete the rows ``where`` says, and their bytes from the count."""
        (gone,) = self._db.execute(
            f"SELECT COALESCE(SUM({_BYTES}), 0) FROM documents WHERE {where}", args
        ).fetchone()
        if gone:
            self._db.execute(f"DELETE FROM documents WHERE {where}", args)
            self._db.execute("UPDATE documents_size SET bytes = bytes - ?", (gone,))

    def _drop_oldest(self, excess: int) -> None:
        """Delete the oldest rows until at least ``excess`` bytes are gone."""
        doomed: list[tuple[int]] = []
        dropped = 0
        rows = self._db.execute(f"SELECT rowid, {_BYTES} FROM documents ORDER BY added, rowid")
        for rowid, size in rows:
            if dropped >= excess:
                break
            doomed.append((rowid,))
            dropped += size
        rows.close()
        self._db.executemany("DELETE FROM documents WHERE rowid = ?", doomed)
        self._db.execute("UPDATE documents_size SET bytes = bytes - ?", (dropped,))

    def read(self, trace_id: int) -> list[str] | None:
        try:
            with self._lock:
                rows = self._db.execute(
                    "SELECT text FROM documents WHERE trace_id = ? AND added >= ? ORDER BY rowid",
                    (f"{trace_id:032x}", time.time() - self._ttl),
                ).fetchall()
        except sqlite3.Error as exc:
            logger.warning("kept documents not read: %s", exc)
            return None
        return [text for (text,) in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _rollback(self) -> None:
        with self._lock:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
