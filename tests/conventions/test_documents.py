"""The per-trace document store keeps within its bounds and counts what it evicts."""

from __future__ import annotations

import json

import pytest

from tracefact import semconv
from tracefact.conventions import DocumentStore, retrieved_documents, span_role


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


# The shapes below are copied from the current sources: `gen_ai.retrieval.documents` from the
# OpenTelemetry GenAI conventions (a JSON array of {"id", "score", "content"} objects;
# opentelemetry-semantic-conventions 0.66b2 names the attribute, the schema now lives in
# open-telemetry/semantic-conventions-genai), and OpenLLMetry's vector DB spans from
# traceloop/openllmetry packages/opentelemetry-instrumentation-chromadb (a `chroma.query`
# span with db.system=chroma and one `db.query.result` event per document, carrying
# db.query.result.id / .distance / .document / .metadata).
def test_gen_ai_retrieval_documents_give_their_contents_in_order() -> None:
    attributes = {
        semconv.GEN_AI_OPERATION_NAME: "retrieval",
        semconv.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(
            [
                {"id": "a", "score": 0.9, "content": "Seattle is rainy."},
                {"id": "b", "score": 0.5},  # content capture off: an id only
                {"id": "c", "content": [{"type": "text", "content": "It is cool."}]},
                "a plain string document",
                {"id": "d", "content": "   "},
                7,
                None,
            ]
        ),
    }
    assert span_role(attributes) == "retriever"
    assert retrieved_documents(attributes) == [
        "Seattle is rainy.",
        "It is cool.",
        "a plain string document",
    ]


@pytest.mark.parametrize(
    "value",
    ["not json", "{", '{"content": "an object, not a list"}', "[" * 5000, 42, b"[]", ""],
)
def test_garbage_gen_ai_retrieval_documents_give_nothing(value: object) -> None:
    attributes = {semconv.GEN_AI_OPERATION_NAME: "retrieval"}
    attributes[semconv.GEN_AI_RETRIEVAL_DOCUMENTS] = value  # type: ignore[assignment]
    assert retrieved_documents(attributes) == []


def test_openllmetry_vector_db_result_events_give_their_documents() -> None:
    attributes = {"db.system": "chroma", "db.operation": "query"}
    events = [
        ("db.query.embeddings", {"db.query.embeddings.vector": "[1.0, 0.0]"}),
        ("db.query.result", {"db.query.result.id": "1", "db.query.result.document": "doc one"}),
        ("db.query.result", {"db.query.result.id": "2", "db.query.result.distance": 0.3}),
        ("db.query.result", {"db.query.result.document": ("not", "a", "string")}),
        ("db.query.result", {"db.query.result.document": "doc two"}),
    ]
    assert span_role(attributes) == "retriever"
    assert retrieved_documents(attributes, events) == ["doc one", "doc two"]


@pytest.mark.parametrize(
    "attributes",
    [{"db.system": "postgresql"}, {"db.system": ("chroma",)}, {"db.system": 3}, {}],
)
def test_other_databases_are_not_retrievers(attributes: dict[str, object]) -> None:
    assert span_role(attributes) is None


def test_openllmetry_langchain_retriever_output_gives_its_documents() -> None:
    # opentelemetry-instrumentation-langchain 0.62.4, callback_handler.on_retriever_start/end:
    # gen_ai.operation.name=vector_db_retrieve, traceloop.span.kind=task, and the documents
    # as traceloop.entity.output = {"documents": [{"page_content", "metadata"} | str], "count"}.
    output = {
        "documents": [
            {"page_content": "Seattle is rainy.", "metadata": {"id": "w1"}},
            "a document without page_content",
            {"metadata": {"id": "w3"}},
        ],
        "count": 3,
    }
    attributes = {
        semconv.GEN_AI_OPERATION_NAME: "vector_db_retrieve",
        "traceloop.span.kind": "task",
        semconv.TRACELOOP_ENTITY_OUTPUT: json.dumps(output),
    }
    assert span_role(attributes) == "retriever"
    assert retrieved_documents(attributes) == [
        "Seattle is rainy.",
        "a document without page_content",
    ]
    for garbage in ("{", json.dumps({"documents": "no list"}), json.dumps([1, 2]), 5):
        attributes[semconv.TRACELOOP_ENTITY_OUTPUT] = garbage
        assert retrieved_documents(attributes) == []
