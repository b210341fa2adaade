"""The `sqlite` request queue: one file on one machine, surviving restarts.

Like the OpenTelemetry Collector's persistent queue on file storage, but on SQLite
(stdlib) in WAL mode: `put` returns once the request's protobuf bytes are committed, so a
request answered 200 is on disk. An entry handed out carries a lease; the process renews
the leases of what it holds (`Leases`), and an entry whose holder died (its lease ran
out) is handed out again with `deliveries` incremented: delivery is at least once.

Durability (`synchronous`): `full` (the default) syncs the WAL on every commit, so a
stored request survives a process kill *and* a power loss or OS crash; `normal` syncs
only at checkpoints, still surviving any process kill (the WAL is in the OS's page
cache), but a power loss may roll back the last requests acknowledged before it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracefact.collector._leases import Leases
from tracefact.collector.queue import (
    Entry,
    QueueFull,
    QueueUnavailable,
    decode_stored,
    require_positive,
)

Synchronous = Literal["full", "normal"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    size INTEGER NOT NULL,
    stored_at REAL NOT NULL,
    deliveries INTEGER NOT NULL DEFAULT 0,
    lease_until REAL NOT NULL DEFAULT 0,
    payload BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_lease ON entries (lease_until, id);
"""

_POLL_SECONDS = 0.1
"""How often a waiting `get` looks again for entries another process stored, or whose
lease ran out; entries stored by this process wake it at once."""


class SqliteQueue:
    """A bounded, durable request queue in one SQLite file (WAL mode).

    Args:
        path: the database file (created with its directory when missing).
        max_entries: requests stored and not acknowledged; `put` raises `QueueFull` beyond.
        max_bytes: the same bound on their protobuf bytes.
        lease_seconds: how long after its holder stopped renewing an entry is handed out
            again (the visibility timeout).
        synchronous: `full` survives power loss, `normal` process kills only (see module).
        retry_after_seconds: the retry hint of `QueueFull`.
    """

    durable = True

    def __init__(
        self,
        path: str | Path,
        *,
        max_entries: int = 10_000,
        max_bytes: int = 1 << 30,
        lease_seconds: float = 30.0,
        synchronous: Synchronous = "full",
        retry_after_seconds: float = 1.0,
    ) -> None:
        require_positive(max_entries=max_entries, max_bytes=max_bytes, lease_seconds=lease_seconds)
        if synchronous not in ("full", "normal"):
            raise ValueError(f"synchronous must be 'full' or 'normal', not {synchronous!r}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._lease = lease_seconds
        self._retry_after = retry_after_seconds
        # One connection for every thread; the lock serialises its use (sqlite3 objects
        # are not safe to share unguarded) and the condition wakes getters on a put.
        self._lock = threading.Lock()
        self._stored = threading.Condition(self._lock)
        self._db = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=10.0
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
        self._db.executescript(_SCHEMA)
        self._leases = Leases(self._renew, lease_seconds / 3, name="tracefact-sqlite-leases")
        self._closed = False

    def put(self, request: ExportTraceServiceRequest) -> None:
        payload = request.SerializeToString()
        with self._stored:
            try:
                with self._transaction():
                    count, size = self._db.execute(
                        "SELECT count(*), coalesce(sum(size), 0) FROM entries"
                    ).fetchone()
                    if count >= self._max_entries or size + len(payload) > self._max_bytes:
                        raise QueueFull(self._retry_after)
                    self._db.execute(
                        "INSERT INTO entries (size, stored_at, payload) VALUES (?, ?, ?)",
                        (len(payload), time.time(), payload),
                    )
            except sqlite3.OperationalError as exc:  # disk full, file locked too long
                raise QueueUnavailable(str(exc), self._retry_after) from exc
            self._stored.notify_all()

    def get(self, max_entries: int, timeout_seconds: float) -> list[Entry]:
        if max_entries < 1:  # a negative LIMIT would mean no limit to SQLite
            return []
        deadline = time.monotonic() + max(0.0, timeout_seconds)
        with self._stored:
            while True:
                entries = self._take(max_entries)
                remaining = deadline - time.monotonic()
                if entries or remaining <= 0 or self._closed:
                    break
                self._stored.wait(min(remaining, _POLL_SECONDS))
        self._leases.hold(entry.id for entry in entries)
        return entries

    def ack(self, entry_id: str) -> None:
        with self._lock:
            if not self._closed:  # after close the entry stays, and comes again on restart
                self._db.execute("DELETE FROM entries WHERE id = ?", (int(entry_id),))
        self._leases.release(entry_id)

    def depth(self) -> int:
        with self._lock:
            if self._closed:
                raise RuntimeError("the queue is closed")
            (count,) = self._db.execute("SELECT count(*) FROM entries").fetchone()
        return int(count)

    def unavailable(self) -> str | None:
        """Only once closed: a local file is there, and a full disk fails `put` itself."""
        return "sqlite queue closed" if self._closed else None

    def close(self) -> None:
        """Hand back what this process still holds (it will not finish it), then close."""
        held = self._leases.close()
        with self._stored:
            if self._closed:
                return
            if held:  # leases end now: the next consumer need not wait `lease_seconds`
                with self._transaction():
                    self._db.executemany(
                        "UPDATE entries SET lease_until = 0 WHERE id = ?",
                        [(int(entry_id),) for entry_id in held],
                    )
            self._closed = True
            self._stored.notify_all()
            self._db.close()

    def _take(self, max_entries: int) -> list[Entry]:
        """Lease up to `max_entries` entries that nobody holds; the caller holds the lock."""
        if self._closed:
            return []
        now = time.time()  # wall clock: leases outlive this process
        with self._transaction():
            rows = self._db.execute(
                "UPDATE entries SET deliveries = deliveries + 1, lease_until = ? WHERE id IN "
                "(SELECT id FROM entries WHERE lease_until <= ? ORDER BY id LIMIT ?) "
                "RETURNING id, deliveries, stored_at, payload",
                (now + self._lease, now, max_entries),
            ).fetchall()
        return [
            Entry(str(entry_id), decode_stored(payload, str(entry_id)), deliveries, stored_at)
            for entry_id, deliveries, stored_at, payload in sorted(rows)
        ]

    def _renew(self, ids: list[str]) -> None:
        with self._lock:
            if self._closed:
                return
            until = time.time() + self._lease
            with self._transaction():
                self._db.executemany(
                    "UPDATE entries SET lease_until = ? WHERE id = ?",
                    [(until, int(entry_id)) for entry_id in ids],
                )

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction, taking the write lock at once (no upgrade deadlocks)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
