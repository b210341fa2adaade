"""A small offline RAG app traced with tracefact.

An in-file corpus, a keyword retriever and a fake LLM that usually answers from the
retrieved passages and sometimes invents a fact. Every request becomes a trace
(chain → retriever → llm), and tracefact's default offline evaluator judges each
answer against the retrieved passages. The spans, with the evaluation attached to
the LLM spans, are printed at the end.

    python examples/rag_demo.py                      # offline, prints the traces
    python examples/rag_demo.py --endpoint http://127.0.0.1:6006   # also send via OTLP
    python examples/rag_demo.py --endpoint http://127.0.0.1:6006 --phoenix http://127.0.0.1:6006
    python examples/rag_demo.py --endpoint http://127.0.0.1:5000 \
        --header x-mlflow-experiment-id=1 --mlflow http://127.0.0.1:5000
"""

from __future__ import annotations

import argparse
import random
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracefact
from tracefact.sinks import MLflowAssessments, PhoenixAnnotations, ResultSink

CORPUS = [
    "The Eiffel Tower was completed in 1889 and is 330 metres tall.",
    "Python was created by Guido van Rossum and first released in 1991.",
    "The Great Barrier Reef lies off the coast of Queensland, Australia.",
    "Marie Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911.",
    "Mount Kilimanjaro, in Tanzania, rises 5,895 metres above sea level.",
    "The Amazon River flows through Peru, Colombia and Brazil into the Atlantic Ocean.",
    "Ada Lovelace wrote the first published algorithm for Babbage's Analytical Engine.",
    "The Rosetta Stone was found in 1799 near the town of Rashid in Egypt.",
]

QUESTIONS = [
    "When was the Eiffel Tower completed?",
    "Who created Python?",
    "Where is the Great Barrier Reef?",
    "Which Nobel Prizes did Marie Curie win?",
    "How high is Mount Kilimanjaro?",
    "Which countries does the Amazon River flow through?",
    "What did Ada Lovelace write?",
    "Where was the Rosetta Stone found?",
]

# What the fake model says when it "hallucinates": fluent, confident and unsupported.
INVENTIONS = {
    "Eiffel": "The Eiffel Tower was completed in 1925 by Gustave Flaubert.",
    "Python": "Python was created by James Gosling at Sun Microsystems in 1995.",
    "Reef": "The Great Barrier Reef lies off the coast of Madagascar.",
    "Curie": "Marie Curie won the Nobel Prize in Literature in 1921.",
    "Kilimanjaro": "Mount Kilimanjaro, in Kenya, rises 7,120 metres above sea level.",
    "Amazon": "The Amazon River flows through Chile and Argentina into the Pacific Ocean.",
    "Lovelace": "Ada Lovelace built the first electronic computer in 1943.",
    "Rosetta": "The Rosetta Stone was found in 1822 in the Valley of the Kings.",
}

WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if len(w) > 3}


@tracefact.retriever
def search(query: str, k: int = 2) -> list[dict[str, object]]:
    """Keyword retriever: the k passages sharing the most words with the query."""
    ranked = sorted(
        ((len(words(query) & words(doc)), i, doc) for i, doc in enumerate(CORPUS)),
        reverse=True,
    )
    return [{"id": f"doc-{i}", "content": doc, "score": float(n)} for n, i, doc in ranked[:k]]


class FakeLLM:
    """Answers from the best passage, or invents a fact with probability `hallucination_rate`."""

    def __init__(self, hallucination_rate: float, seed: int) -> None:
        self.hallucination_rate = hallucination_rate
        self.random = random.Random(seed)

    @tracefact.llm(name="generate", model="fake-llm-1")
    def generate(self, question: str) -> str:
        if self.random.random() < self.hallucination_rate:
            return next(v for k, v in INVENTIONS.items() if k.lower() in question.lower())
        return max(CORPUS, key=lambda doc: len(words(question) & words(doc)))


@tracefact.chain
def answer_question(llm: FakeLLM, question: str) -> str:
    search(question)  # remembered: the LLM span below is grounded in these documents
    return llm.generate(question)


def print_traces(spans: Sequence[ReadableSpan]) -> None:
    """Each request as a small tree; LLM spans with the evaluation attached to them."""
    by_trace: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in spans:
        if span.context is not None:
            by_trace[span.context.trace_id].append(span)
    for trace_spans in by_trace.values():
        trace_spans.sort(key=lambda s: s.start_time or 0)
        for span in trace_spans:
            attributes = span.attributes or {}
            kind = attributes.get("openinference.span.kind", "")
            indent = "  " if span.parent else ""
            print(f"{indent}{kind:<9} {span.name}")
            if kind == "RETRIEVER":
                i = 0
                while f"retrieval.documents.{i}.document.content" in attributes:
                    content = attributes[f"retrieval.documents.{i}.document.content"]
                    print(f"{indent}    doc {i}: {content}")
                    i += 1
            elif kind == "LLM":
                print(f"{indent}    question: {attributes.get('input.value')}")
                print(f"{indent}    answer:   {attributes.get('output.value')}")
                print_evaluation(attributes, indent + "    ")
        print()


def print_evaluation(attributes: Mapping[str, Any], indent: str) -> None:
    status = attributes.get("tracefact.eval.status")
    if status != "ok":
        print(f"{indent}evaluation: {status} {attributes.get('tracefact.eval.error', '')}")
        return
    label = attributes.get("tracefact.eval.hallucination.label")
    score = attributes.get("tracefact.eval.hallucination.score", 0.0)
    marker = "✗" if label == "hallucinated" else "✓"
    print(f"{indent}{marker} {label} (score {score:.2f})")
    print(f"{indent}  why: {attributes.get('tracefact.eval.hallucination.explanation')}")
    print(f"{indent}  by:  {attributes.get('tracefact.eval.hallucination.evaluator')}")


def print_summary(spans: Sequence[ReadableSpan]) -> None:
    statuses = Counter(
        (s.attributes or {}).get("tracefact.eval.status")
        for s in spans
        if (s.attributes or {}).get("openinference.span.kind") == "LLM"
    )
    labels = Counter(
        (s.attributes or {}).get("tracefact.eval.hallucination.label")
        for s in spans
        if (s.attributes or {}).get("tracefact.eval.status") == "ok"
    )
    evaluated = statuses["ok"]
    rate = labels["hallucinated"] / evaluated if evaluated else 0.0
    print(
        f"summary: {sum(statuses.values())} answers, {evaluated} evaluated, "
        f"hallucination rate {rate:.0%}, dropped {statuses['dropped']}, "
        f"other statuses {dict((k, v) for k, v in statuses.items() if k not in ('ok', 'dropped'))}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--endpoint", help="also export the spans to this OTLP/HTTP endpoint")
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an OTLP request header, e.g. x-mlflow-experiment-id=1 (repeatable)",
    )
    parser.add_argument("--phoenix", metavar="URL", help="also post results as Phoenix annotations")
    parser.add_argument("--mlflow", metavar="URL", help="also log results as MLflow assessments")
    parser.add_argument("--hallucination-rate", type=float, default=0.35)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    shown = InMemorySpanExporter()
    exporters: list[str | SpanExporter] = [shown]
    if args.endpoint:
        exporters.append("otlp")
    headers = dict(header.split("=", 1) for header in args.header)
    sinks: list[ResultSink] = []
    if args.phoenix:
        sinks.append(PhoenixAnnotations(args.phoenix))
    if args.mlflow:
        sinks.append(MLflowAssessments(args.mlflow))
    # No evaluator given: tracefact's offline default judges every answer.
    tracefact.configure(
        service_name="rag-demo",
        exporter=exporters,
        endpoint=args.endpoint,
        headers=headers or None,
        sinks=sinks,
    )
    llm = FakeLLM(args.hallucination_rate, args.seed)
    for question in QUESTIONS:
        answer_question(llm, question)
    tracefact.force_flush()
    print_traces(shown.get_finished_spans())
    print_summary(shown.get_finished_spans())
    tracefact.shutdown()


if __name__ == "__main__":
    main()
