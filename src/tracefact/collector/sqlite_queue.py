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

Faults are handled where they happen (`Outage`): while the file cannot be written
(another process holds its write lock, the disk is full) `put` raises
`QueueUnavailable`, and `get` and `ack` are tried again with backoff (an acknowledgement
that failed waits in this process and goes first at the next `get`). A file that is not a
queue (damaged, or not SQLite at all) raises `QueueBroken`: at open, or from `get`.

Damage while the queue runs is looked for on the file itself, at most once a second: in
WAL mode SQLite reads the pages it needs from the WAL and its page cache, so a file
overwritten, truncated, removed or replaced under a running queue would otherwise go
unnoticed until the next start. Its header must still be SQLite's, and the path still the
file that was opened; damage inside pages the queue never reads again is not found.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracefact.collector._leases import Leases
from tracefact.collector.queue import (
    Encoded,
    Entry,
    Outage,
    QueueBroken,
    QueueFull,
    QueueUnavailable,
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
_HEADER = b"SQLite format 3\x00"
_CHECK_SECONDS = 1.0
"""How often the file is checked for damage (`_check_file`)."""


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
        busy_seconds: how long one statement waits for another process's write lock
            before the operation counts as failed (and is retried, or refused).
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
        busy_seconds: float = 2.0,
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
        try:
            self._db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=busy_seconds
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
            self._db.executescript(_SCHEMA)
            self._db.execute(
                "SELECT id, size, stored_at, deliveries, lease_until, payload FROM entries LIMIT 0"
            )
            self._file = self._identity()
        except (sqlite3.DatabaseError, OSError) as exc:
            raise QueueBroken(f"queue file {self.path} is not a tracefact queue: {exc}") from None
        self._checked_at = time.monotonic()
        self._damage: str | None = None
        self._leases = Leases(self._renew, lease_seconds / 3, name="tracefact-sqlite-leases")
        self._outage = Outage(f"sqlite:{self.path}")
        self._unacked: list[str] = []  # acknowledgements that failed, tried again first
        self._depth = 0
        self._closed = False

    def put(self, request: ExportTraceServiceRequest | Encoded) -> None:
        payload = Encoded.of(request).body
        with self._stored:
            if self._outage.wait_seconds() > 0:  # failed lately: refused at once, not queued
                raise QueueUnavailable(str(self._outage.reason), self._retry_after)
            try:
                self._check_file()
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
            except sqlite3.Error as exc:  # disk full, file locked too long, damaged
                self._outage.failed("put", exc)
                raise QueueUnavailable(str(exc), self._retry_after) from exc
            self._outage.succeeded()
            self._stored.notify_all()

    def get(self, max_entries: int, timeout_seconds: float) -> list[Entry]:
        if max_entries < 1:  # a negative LIMIT would mean no limit to SQLite
            return []
        deadline = time.monotonic() + max(0.0, timeout_seconds)
        entries: list[Entry] = []
        with self._stored:
            while True:
                if self._outage.wait_seconds() <= 0:
                    entries = self._try_take(max_entries)
                remaining = deadline - time.monotonic()
                if entries or remaining <= 0 or self._closed:
                    break
                wait = max(_POLL_SECONDS, self._outage.wait_seconds())
                self._stored.wait(min(remaining, wait))
        self._leases.hold(entry.id for entry in entries)
        return entries

    def ack(self, entry_id: str) -> None:
        with self._lock:
            self._unacked.append(entry_id)
            if self._outage.wait_seconds() <= 0:
                self._try_acks()

    def depth(self) -> int:
        """Entries stored; while the file cannot be read, the last count read."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the queue is closed")
            try:
                (count,) = self._db.execute("SELECT count(*) FROM entries").fetchone()
            except sqlite3.Error:
                return self._depth
            self._depth = int(count)
        return self._depth

    def unavailable(self) -> str | None:
        """Once closed, or while operations on the file fail (locked, disk full)."""
        if self._closed:
            return "sqlite queue closed"
        return self._outage.reason

    def close(self) -> None:
        """Hand back what this process still holds (it will not finish it), then close."""
        with self._stored:
            if self._unacked:
                self._try_acks()
        held = self._leases.close()
        with self._stored:
            if self._closed:
                return
            try:
                if held:  # leases end now: the next consumer need not wait `lease_seconds`
                    with self._transaction():
                        self._db.executemany(
                            "UPDATE entries SET lease_until = 0 WHERE id = ?",
                            [(int(entry_id),) for entry_id in held],
                        )
            except sqlite3.Error as exc:  # they run out after `lease_seconds` instead
                self._outage.failed("close", exc)
            self._closed = True
            self._stored.notify_all()
            self._db.close()

    def _try_take(self, max_entries: int) -> list[Entry]:
        """Acknowledge what failed before, then take (the caller holds the lock).

        A failure backs off; a damaged file raises `QueueBroken`.
        """
        try:
            if self._unacked:
                self._try_acks()
                if self._unacked:
                    return []
            self._check_file()
            entries = self._take(max_entries)
        except sqlite3.OperationalError as exc:  # locked, disk full or unreadable: clears
            self._outage.failed("get", exc)
            return []
        except sqlite3.DatabaseError as exc:  # not a database (any more): cannot clear
            self._outage.failed("get", exc)
            raise QueueBroken(f"queue file {self.path} is damaged: {exc}") from None
        self._outage.succeeded()
        return entries

    def _identity(self) -> tuple[int, int]:
        """The file at `path` (device, inode), once its header says SQLite; else an error."""
        with open(self.path, "rb") as file:
            if file.read(len(_HEADER)) != _HEADER:
                raise sqlite3.DatabaseError("its header is not SQLite's (overwritten?)")
            stat = os.fstat(file.fileno())
        return stat.st_dev, stat.st_ino

    def _check_file(self) -> None:
        """Raise `sqlite3.DatabaseError` when the file was damaged, removed or replaced.

        At most once a second; the caller holds the lock.
        """
        now = time.monotonic()
        if self._damage is None and now - self._checked_at >= _CHECK_SECONDS:
            self._checked_at = now
            try:
                if self._identity() != self._file:
                    self._damage = "another file took its place"
            except FileNotFoundError:
                self._damage = "the file was removed"
            except sqlite3.DatabaseError as exc:
                self._damage = str(exc)
            except OSError as exc:  # unreadable now: may clear
                raise sqlite3.OperationalError(f"cannot read the file: {exc}") from None
        if self._damage is not None:  # found once, it stays: damage does not clear
            raise sqlite3.DatabaseError(self._damage)

    def _try_acks(self) -> None:
        """Delete the acknowledged entries; on failure they wait for the next try.

        After close an entry stays, and comes again on restart. The caller holds the lock.
        """
        if self._closed:
            return
        ids, self._unacked = self._unacked, []
        try:
            with self._transaction():
                self._db.executemany("DELETE FROM entries WHERE id = ?", [(int(i),) for i in ids])
        except sqlite3.Error as exc:
            self._unacked = ids + self._unacked
            self._outage.failed("ack", exc)
            return
        self._outage.succeeded()
        for entry_id in ids:
            self._leases.release(entry_id)

    def _take(self, max_entries: int) -> list[Entry]:
        """Lease up to `max_entries` entries that nobody holds; the caller holds the lock."""
        if self._closed:
            return []
        now = time.time()  # wall clock: leases outlive this process
        held = json.dumps(sorted(int(entry_id) for entry_id in self._leases.held()))
        with self._transaction():
            rows = self._db.execute(
                "UPDATE entries SET deliveries = deliveries + 1, lease_until = ? WHERE id IN "
                "(SELECT id FROM entries WHERE lease_until <= ? "
                "AND id NOT IN (SELECT value FROM json_each(?)) ORDER BY id LIMIT ?) "
                "RETURNING id, deliveries, stored_at, payload",
                (now + self._lease, now, held, max_entries),
            ).fetchall()
        return [
            Entry.stored(str(entry_id), payload, deliveries, stored_at)
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
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:  # a failed COMMIT (disk full) leaves it open
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
            raise
