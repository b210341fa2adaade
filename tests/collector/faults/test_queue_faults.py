"""Queue operations that fail where they happen, in process (fast: part of `make test`).

A fault-injecting wrapper around the SQLite connection makes every statement fail as a
locked file, a full disk or a damaged file would, so these run on any machine; the
subprocess tests in `test_collector_faults.py` meet the same faults for real.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tests.collector.queues.backends import request
from tests.waiting import eventually
from tracefact import semconv
from tracefact.collector._leases import Leases
from tracefact.collector.metrics import CollectorMetrics
from tracefact.collector.queue import Entry, QueueBroken, QueueUnavailable
from tracefact.collector.sqlite_queue import SqliteQueue
from tracefact.collector.supervisor import Supervisor

LOCKED = sqlite3.OperationalError("database is locked")
FULL = sqlite3.OperationalError("database or disk is full")
DAMAGED = sqlite3.DatabaseError("database disk image is malformed")


class FaultyConnection:
    """A sqlite3 connection whose statements raise `fault` while it is set."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self.fault: Exception | None = None

    def _check(self, sql: str) -> None:
        if self.fault is not None and not sql.startswith("ROLLBACK"):
            raise self.fault

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        self._check(sql)
        return self._connection.execute(sql, *args)

    def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:
        self._check(sql)
        return self._connection.executemany(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)


def name(entry: Entry) -> str:
    return entry.request.resource_spans[0].scope_spans[0].spans[0].name


@pytest.fixture
def faulty(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FaultyConnection]]:
    """Every connection `sqlite3.connect` opens from here on, wrapped."""
    opened: list[FaultyConnection] = []
    connect = sqlite3.connect

    def wrapped(*args: Any, **kwargs: Any) -> FaultyConnection:
        connection = FaultyConnection(connect(*args, **kwargs))
        opened.append(connection)
        return connection

    monkeypatch.setattr(sqlite3, "connect", wrapped)
    yield opened


@pytest.mark.parametrize("fault", [LOCKED, FULL], ids=["locked", "disk-full"])
def test_a_fault_that_clears_refuses_puts_and_retries_gets_and_acks(
    tmp_path: Path, faulty: list[FaultyConnection], fault: Exception
) -> None:
    queue = SqliteQueue(tmp_path / "queue.db", lease_seconds=30)
    (connection,) = faulty
    queue.put(request(1))
    queue.put(request(2))
    [first] = queue.get(1, 1.0)
    assert queue.depth() == 2

    connection.fault = fault
    with pytest.raises(QueueUnavailable):
        queue.put(request(3))  # the receiver answers 503 and counts it
    assert queue.get(1, 0.2) == []  # no exception: the engine's loop goes on
    queue.ack(first.id)  # no exception: the acknowledgement waits
    assert str(fault) in str(queue.unavailable())
    assert queue.depth() == 2  # the last count read

    connection.fault = None
    [second] = queue.get(1, 5.0)  # the waiting acknowledgement goes first
    assert name(second) == "span-2-0" and second.deliveries == 1
    queue.ack(second.id)
    assert queue.unavailable() is None
    assert queue.depth() == 0
    queue.close()


def test_a_failed_commit_leaves_no_transaction_open(
    tmp_path: Path, faulty: list[FaultyConnection]
) -> None:
    queue = SqliteQueue(tmp_path / "queue.db")
    (connection,) = faulty
    original = connection.execute

    def failing_commit(sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "COMMIT":
            raise FULL
        return original(sql, *args)

    connection.execute = failing_commit  # type: ignore[method-assign]
    with pytest.raises(QueueUnavailable):
        queue.put(request(1))
    connection.execute = original  # type: ignore[method-assign]

    def stored() -> bool:  # refused at once until the backoff is over, then stored
        try:
            queue.put(request(2))
        except QueueUnavailable:
            return False
        return True

    assert eventually(stored)
    [entry] = queue.get(5, 1.0)
    assert name(entry) == "span-2-0"
    queue.close()


def test_a_damaged_file_is_a_fault_that_cannot_clear(
    tmp_path: Path, faulty: list[FaultyConnection]
) -> None:
    queue = SqliteQueue(tmp_path / "queue.db")
    (connection,) = faulty
    connection.fault = DAMAGED
    with pytest.raises(QueueUnavailable):
        queue.put(request(1))
    with pytest.raises(QueueBroken, match="is damaged"):
        queue.get(1, 0.1)
    connection.fault = None
    queue.close()


def _overwrite(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * (path.stat().st_size // 256 + 1))


def _truncate(path: Path) -> None:
    path.write_bytes(b"")


def _replace(path: Path) -> None:
    path.unlink()
    sqlite3.connect(path).close()  # an empty SQLite file, not the queue's


@pytest.mark.parametrize(
    "damage", [_overwrite, _truncate, _replace, Path.unlink], ids=lambda f: f.__name__
)
def test_a_real_file_damaged_under_a_running_queue_is_found(tmp_path: Path, damage: Any) -> None:
    """WAL mode and the page cache serve every read: the file itself is looked at."""
    path = tmp_path / "queue.db"
    queue = SqliteQueue(path)
    for number in range(20):
        queue.put(request(number))
    for entry in queue.get(5, 0.1):
        queue.ack(entry.id)
    damage(path)

    def refused() -> bool:
        try:
            queue.put(request(99))
        except QueueUnavailable:
            return True
        return False

    assert eventually(refused)
    assert queue.unavailable() is not None
    with pytest.raises(QueueBroken, match="is damaged"):
        queue.get(5, 0.1)
    with pytest.raises(QueueUnavailable):  # found once, it stays found
        queue.put(request(100))
    queue.close()


def test_a_file_that_is_not_a_queue_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "queue.db"
    path.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(QueueBroken) as refused:
        SqliteQueue(path)
    assert str(refused.value) == (
        f"queue file {path} is not a tracefact queue: file is not a database"
    )
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE entries (id INTEGER PRIMARY KEY, name TEXT)")
    with pytest.raises(QueueBroken, match="is not a tracefact queue: no such column"):
        SqliteQueue(other)


def test_a_consumer_that_acknowledges_nothing_stops_renewing_what_it_took_long_ago() -> None:
    renewed: list[list[str]] = []
    leases = Leases(renewed.append, interval_seconds=0.01, name="test", stall_seconds=0.3)
    leases.hold(["old"])
    assert eventually(lambda: renewed and renewed[-1] == ["old"])
    assert eventually(lambda: leases.renewable() == [])  # stalled: "old" runs out
    leases.hold(["new"])  # taken recently: still renewed while it may be worked on
    assert leases.renewable() == ["new"]
    leases.release("new")  # progress: everything held is renewed again
    leases.hold(["newer"])
    assert leases.renewable() == ["newer", "old"]
    assert leases.close() == ["newer", "old"]


def restarts(reader: InMemoryMetricReader) -> dict[str, float]:
    data = reader.get_metrics_data()
    out: dict[str, float] = {}
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == semconv.METRIC_COLLECTOR_RESTARTS:
                    for point in metric.data.data_points:
                        out[str(point.attributes["thread"])] = float(point.value)
    return out


def test_a_loop_that_raises_is_restarted_and_counted() -> None:
    reader = InMemoryMetricReader()
    supervisor = Supervisor(CollectorMetrics(MeterProvider(metric_readers=[reader])), 0.01)
    runs: list[int] = []
    stop = threading.Event()

    def loop() -> None:
        runs.append(1)
        if len(runs) <= 2:
            raise RuntimeError("database is locked")
        stop.wait()

    thread = supervisor.spawn("test-loop", loop, stop)
    assert eventually(lambda: len(runs) == 3)
    assert restarts(reader) == {"test-loop": 2}
    assert supervisor.fatal is None
    stop.set()
    thread.join(5)
    assert not thread.is_alive()


def test_a_fault_that_cannot_clear_is_fatal_and_not_restarted() -> None:
    supervisor = Supervisor(CollectorMetrics(MeterProvider()), 0.01)
    runs: list[int] = []

    def loop() -> None:
        runs.append(1)
        raise QueueBroken("queue file q.db is damaged: database disk image is malformed")

    thread = supervisor.spawn("test-loop", loop, threading.Event())
    assert supervisor.failed.wait(5)
    thread.join(5)
    assert runs == [1]
    assert supervisor.fatal == (
        "test-loop: queue file q.db is damaged: database disk image is malformed"
    )
