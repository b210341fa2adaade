"""The per-trace document store keeps within its bounds and counts what it evicts."""

from __future__ import annotations

import pytest

from tracefact.conventions import DocumentStore


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_documents_are_kept_per_trace_until_forgotten() -> None:
    store = DocumentStore()
    store.add(1, ["a", "b"])
    store.add(2, ["c"])
    store.add(1, ["d"])
    assert store.documents(1) == ["a", "b", "d"]
    assert store.documents(2) == ["c"]
    store.forget(1)
    assert store.documents(1) == []
    assert store.evictions == {}


def test_bytes_bound_evicts_the_oldest_traces_first() -> None:
    store = DocumentStore(max_bytes=10)
    store.add(1, ["12345"])
    store.add(2, ["12345"])
    store.add(3, ["é"])  # two bytes: trace 1 must go
    assert store.documents(1) == []
    assert store.documents(2) == ["12345"]
    store.add(4, ["x" * 11])  # larger than the whole store: never kept
    assert store.documents(4) == []
    assert store.evictions == {"bytes": 2}


def test_trace_and_document_counts_are_bounded() -> None:
    store = DocumentStore(max_traces=2, max_documents=3)
    store.add(1, ["a"])
    store.add(2, ["b"])
    store.add(3, ["c", "d", "e", "f", "g"])
    assert len(store) == 2
    assert store.documents(3) == ["c", "d", "e"]
    assert store.evictions == {"traces": 1, "documents": 2}


def test_traces_not_added_to_for_max_age_are_forgotten() -> None:
    clock = Clock()
    store = DocumentStore(max_age_seconds=10, clock=clock)
    store.add(1, ["a", "b"])
    clock.now = 5
    store.add(2, ["c"])
    clock.now = 11
    assert store.documents(1) == []
    assert store.documents(2) == ["c"]
    assert store.evictions == {"age": 2}


@pytest.mark.parametrize("bound", ["max_bytes", "max_traces", "max_documents", "max_age_seconds"])
def test_bounds_must_be_positive(bound: str) -> None:
    with pytest.raises(ValueError, match="positive"):
        DocumentStore(**{bound: 0})
