"""Retriever documents reach the LLM span of the same trace, and never another trace's."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace

import tracefact
from tests.conftest import Spans
from tracefact import semconv


@dataclass
class LangchainLikeDoc:
    page_content: str
    metadata: dict[str, Any]


@tracefact.retriever(name="search")
def search(query: str) -> list[Any]:
    return [
        f"doc about {query}",
        {"content": "dict doc", "id": "d2", "score": 0.7},
        (LangchainLikeDoc("object doc", {}), 0.4),
    ]


@tracefact.llm(name="answer")
def answer(question: str) -> str:
    return f"answer to {question}"


@tracefact.chain(name="rag")
def rag(question: str) -> str:
    search(question)
    return answer(question)


def test_retriever_documents_become_attributes(spans: Spans) -> None:
    search("cats")
    attributes = spans.one("search").attributes
    assert attributes["openinference.span.kind"] == "RETRIEVER"
    assert attributes["input.value"] == "cats"
    assert attributes["retrieval.documents.0.document.content"] == "doc about cats"
    assert attributes["retrieval.documents.1.document.content"] == "dict doc"
    assert attributes["retrieval.documents.1.document.id"] == "d2"
    assert attributes["retrieval.documents.1.document.score"] == 0.7
    assert attributes["retrieval.documents.2.document.content"] == "object doc"
    assert attributes["retrieval.documents.2.document.score"] == 0.4


def test_llm_span_gets_the_documents_retrieved_before_it(spans: Spans) -> None:
    rag("cats")
    assert spans.one("answer").attributes["tracefact.contexts"] == (
        "doc about cats",
        "dict doc",
        "object doc",
    )


def test_explicit_contexts_win_over_remembered_documents(spans: Spans) -> None:
    @tracefact.llm(name="explicit")
    def explicit(question: str, contexts: list[str]) -> str:
        return "x"

    @tracefact.chain(name="flow")
    def flow() -> None:
        search("dogs")
        explicit("q", ["only this"])

    flow()
    assert spans.one("explicit").attributes["tracefact.contexts"] == ("only this",)


def test_no_documents_leak_into_a_later_trace(spans: Spans) -> None:
    rag("first")
    answer("standalone")  # its own trace, nothing retrieved in it
    standalone = [s for s in spans.all() if s.attributes["input.value"] == "standalone"]
    assert "tracefact.contexts" not in standalone[0].attributes


def _contexts_by_question(spans: Spans) -> dict[str, tuple[str, ...]]:
    return {
        str(s.attributes["input.value"]): tuple(s.attributes["tracefact.contexts"])  # type: ignore[arg-type]
        for s in spans.all()
        if s.name == "answer"
    }


def test_concurrent_threads_do_not_share_documents(spans: Spans) -> None:
    barrier = threading.Barrier(8)

    @tracefact.chain(name="rag_sync")
    def rag_sync(question: str) -> None:
        search(question)
        barrier.wait()  # every thread has retrieved before any answers
        answer(question)

    threads = [threading.Thread(target=rag_sync, args=(f"q{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    by_question = _contexts_by_question(spans)
    assert len(by_question) == 8
    for question, contexts in by_question.items():
        assert contexts[0] == f"doc about {question}"
        assert len(contexts) == 3


async def test_concurrent_asyncio_tasks_do_not_share_documents(spans: Spans) -> None:
    @tracefact.retriever(name="asearch")
    async def asearch(query: str) -> list[str]:
        await asyncio.sleep(0.01)
        return [f"doc about {query}"]

    @tracefact.llm(name="answer")
    async def aanswer(question: str) -> str:
        await asyncio.sleep(0.01)
        return "x"

    @tracefact.chain(name="arag")
    async def arag(question: str) -> None:
        await asearch(question)
        await aanswer(question)

    await asyncio.gather(*(arag(f"q{i}") for i in range(20)))
    by_question = _contexts_by_question(spans)
    assert by_question == {f"q{i}": (f"doc about q{i}",) for i in range(20)}


def genai_chat(tracer: trace.Tracer, answer_text: str) -> None:
    """An LLM span as OpenLLMetry's current releases and the GenAI instrumentors write it."""
    attributes = {
        semconv.GEN_AI_OPERATION_NAME: "chat",
        semconv.GEN_AI_INPUT_MESSAGES: json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "weather?"}]}]
        ),
        semconv.GEN_AI_OUTPUT_MESSAGES: json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": answer_text}]}]
        ),
    }
    with tracer.start_as_current_span("chat gpt-4o-mini", attributes=attributes):
        pass


def test_a_gen_ai_retrieval_span_grounds_the_llm_span_after_it(spans: Spans) -> None:
    tracer = trace.get_tracer("genai-app")
    with tracer.start_as_current_span("rag"):
        documents = json.dumps([{"id": "w1", "score": 0.9, "content": "Seattle is rainy."}])
        retrieval = {
            semconv.GEN_AI_OPERATION_NAME: "retrieval",
            semconv.GEN_AI_RETRIEVAL_DOCUMENTS: documents,
        }
        with tracer.start_as_current_span("retrieval kb", attributes=retrieval):
            pass
        genai_chat(tracer, "Seattle is rainy.")
    genai_chat(tracer, "Seattle is rainy.")  # another trace: nothing retrieved there
    chat_spans = [s for s in spans.all() if s.name == "chat gpt-4o-mini"]
    grounded, alone = sorted(chat_spans, key=lambda s: semconv.CONTEXTS in s.attributes)[::-1]
    assert grounded.attributes[semconv.CONTEXTS] == ("Seattle is rainy.",)
    assert grounded.attributes[semconv.CONTEXTS_SOURCE] == "retrieval"
    assert alone.attributes[semconv.EVAL_SKIP_REASON] == "no_contexts"


def test_an_openllmetry_vector_db_query_grounds_the_llm_span_after_it(spans: Spans) -> None:
    tracer = trace.get_tracer("openllmetry-app")
    with tracer.start_as_current_span("rag"):
        with tracer.start_as_current_span("chroma.query") as query:
            query.set_attributes({"db.system": "chroma", "db.operation": "query"})
            for i, text in enumerate(["Seattle is rainy.", "It is cool in spring."]):
                query.add_event(
                    "db.query.result",
                    {"db.query.result.id": f"d{i}", "db.query.result.document": text},
                )
        genai_chat(tracer, "Seattle is rainy.")
    chat = spans.one("chat gpt-4o-mini")
    assert chat.attributes[semconv.CONTEXTS] == ("Seattle is rainy.", "It is cool in spring.")
    assert chat.attributes[semconv.CONTEXTS_SOURCE] == "retrieval"
    assert chat.attributes[semconv.EVAL_STATUS] == "ok"


class GatedEvaluator:
    """Judges every span as factual; the first judgement waits until `gate` opens."""

    name = "hallucination"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.calls = 0

    def describe(self) -> Any:
        from tracefact.evaluators.base import EvaluatorDescription

        return EvaluatorDescription(name=self.name, evaluator="gated")

    async def evaluate(self, case: Any) -> Any:
        from tracefact.evaluators.base import EvalResult

        self.calls += 1
        if self.calls == 1:
            await asyncio.to_thread(self.gate.wait, 30)
        return EvalResult(name=self.name, label="factual", score=0.0, evaluator="gated")


def test_a_span_read_on_the_evaluation_loop_keeps_its_trace_documents_after_the_root_ends(
    spans: Spans,
) -> None:
    """The span is read on the loop after its trace's root ended and the store forgot it.

    It was handed over with its trace's documents as it ended.
    """
    gated = GatedEvaluator()
    spans.reconfigure(evaluators=[gated], concurrency=1)
    answer("first")  # holds the loop's one place until the gate opens
    rag("cats")  # ended, root and all, while the first is still being judged
    assert not tracefact._configure._installation.switch.downstream.reader.store.traces  # type: ignore[union-attr]
    gated.gate.set()
    rag_answer = [s for s in spans.all() if s.name == "answer" and "cats" in str(s.attributes)]
    [span] = rag_answer
    assert span.attributes[semconv.EVAL_STATUS] == "ok"
    assert span.attributes[semconv.CONTEXTS_SOURCE] == semconv.CONTEXT_SOURCE_RETRIEVAL
    assert span.attributes[semconv.CONTEXTS] == ("doc about cats", "dict doc", "object doc")


def test_documents_past_the_span_attribute_limit_are_counted_not_recorded(spans: Spans) -> None:
    """Past OTel's 128 attributes the SDK evicts the oldest: the span's kind must stay."""

    @tracefact.retriever(name="many")
    def many(query: str) -> list[dict[str, Any]]:
        return [{"content": f"passage {i}", "id": f"d{i}", "score": 0.5} for i in range(60)]

    @tracefact.chain(name="flow")
    def flow() -> None:
        many("q")
        answer("q")

    flow()
    attributes = spans.one("many").attributes
    assert attributes["openinference.span.kind"] == "RETRIEVER"
    assert attributes["input.value"] == "q"
    recorded = {k.split(".")[2] for k in attributes if k.startswith("retrieval.documents.")}
    kept = len(recorded)
    assert 30 <= kept < 60
    assert attributes["retrieval.documents.0.document.content"] == "passage 0"  # the first kept
    assert attributes[semconv.DOCUMENTS_OMITTED] == 60 - kept
    contexts = spans.one("answer").attributes["tracefact.contexts"]
    assert contexts[:kept] == tuple(f"passage {i}" for i in range(kept))


def test_iterators_passed_to_or_returned_by_decorated_functions_are_left_unread(
    spans: Spans,
) -> None:
    """Reading a generator would consume what the caller gets back, or never end."""

    @tracefact.retriever(name="lazy")
    def lazy(query: str) -> Any:
        return (text for text in ["Paris is the capital of France."])

    @tracefact.retriever(name="endless")
    def endless(query: str) -> Any:
        return itertools.count()

    @tracefact.llm(name="counting")
    def counting(question: str, contexts: Any) -> str:
        return f"{len(list(contexts))} contexts"

    assert list(lazy("q")) == ["Paris is the capital of France."]
    assert next(endless("q")) == 0
    assert counting("q", (text for text in ["a", "b"])) == "2 contexts"
    for name in ("lazy", "endless"):
        assert not any(k.startswith("retrieval.documents.") for k in spans.one(name).attributes)
    counted = spans.one("counting").attributes
    assert tuple(counted.get(semconv.CONTEXTS, ())) == ()
    assert counted[semconv.EVAL_SKIP_REASON] == semconv.SKIP_NO_CONTEXTS
