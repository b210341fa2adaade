"""What only the SQLite queue does: its file's settings, bad settings, a damaged entry."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.collector.queues.backends import names, request
from tracefact.collector.sqlite_queue import SqliteQueue


@pytest.mark.parametrize("synchronous", ["full", "normal"])
def test_the_file_is_in_wal_mode_and_readable_by_sqlite_itself(
    tmp_path: Path, synchronous: str
) -> None:
    queue = SqliteQueue(tmp_path / "q.db", synchronous=synchronous)  # type: ignore[arg-type]
    queue.put(request(1))
    try:
        db = sqlite3.connect(tmp_path / "q.db")
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("SELECT count(*) FROM entries").fetchone() == (1,)
        db.close()
    finally:
        queue.close()


@pytest.mark.parametrize(
    "options",
    [{"max_entries": 0}, {"max_bytes": 0}, {"lease_seconds": 0}, {"synchronous": "off"}],
)
def test_bad_settings_are_refused_naming_them(tmp_path: Path, options: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(options))):
        SqliteQueue(tmp_path / "q.db", **options)  # type: ignore[arg-type]


def test_the_byte_bound_refuses_a_request_that_does_not_fit(tmp_path: Path) -> None:
    size = len(request(1, spans=4).SerializeToString())
    queue = SqliteQueue(tmp_path / "q.db", max_bytes=size * 2 + 10)
    queue.put(request(1, spans=4))
    queue.put(request(2, spans=4))
    with pytest.raises(Exception, match="queue full"):
        queue.put(request(3, spans=4))
    queue.close()


def test_a_damaged_entry_is_handed_on_empty_and_the_rest_still_flows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    queue = SqliteQueue(tmp_path / "q.db")
    queue.put(request(1))
    queue.put(request(2))
    db = sqlite3.connect(tmp_path / "q.db")
    db.execute("UPDATE entries SET payload = x'ffff' WHERE id = (SELECT min(id) FROM entries)")
    db.commit()
    db.close()

    damaged, intact = queue.get(2, 1.0)
    assert names(damaged.request) == []
    assert names(intact.request) == ["span-2-0"]
    assert "is not an OTLP request" in caplog.text
    queue.ack(damaged.id)
    queue.ack(intact.id)
    assert queue.depth() == 0
    queue.close()
