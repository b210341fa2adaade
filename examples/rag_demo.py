"""A small offline RAG app traced with tracefact.

An in-file corpus, a keyword retriever and two fake LLMs that usually answer from the
retrieved passages and sometimes invent a fact (the smaller one twice as often in the
second half of the run). Every request becomes a trace (chain → retriever → llm), and
tracefact's default offline evaluator judges each answer against the retrieved
passages. The first traces, with the evaluation attached to the LLM spans, are printed
at the end; `--spans` also writes every span to a file that `tracefact report` draws.

    # tracefact is not on a package index: install it from a clone (or the wheel
    # that `make dist` builds, dist/tracefact-*.whl, in place of `-e .`); `make demo`
    # does all of this in .venv.
    pip install -e .
    python examples/rag_demo.py                      # offline, prints the traces
    python examples/rag_demo.py --requests 240 --spans spans.jsonl   # then:
    tracefact report spans.jsonl --html report.html
    python examples/rag_demo.py --endpoint http://127.0.0.1:6006   # also send via OTLP
    python examples/rag_demo.py --endpoint http://127.0.0.1:6006 --phoenix http://127.0.0.1:6006
    python examples/rag_demo.py --endpoint http://127.0.0.1:5000 \
        --header x-mlflow-experiment-id=1 --mlflow http://127.0.0.1:5000
"""

from __future__ import annotations

import argparse
import random
import re
import time
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

    def __init__(self, model: str, hallucination_rate: float, seed: int) -> None:
        self.model = model
        self.hallucination_rate = hallucination_rate
        self.random = random.Random(seed)
        self.latency = random.Random(seed + 1000)

    def generate(self, question: str) -> str:
        with tracefact.span("generate", kind="llm", model=self.model) as span:
            time.sleep(self.latency.uniform(0.005, 0.025))  # a model takes a moment
            if self.random.random() < self.hallucination_rate:
                text = next(v for k, v in INVENTIONS.items() if k.lower() in question.lower())
            else:
                text = max(CORPUS, key=lambda doc: len(words(question) & words(doc)))
            span.record(input=question, output=text)
        return text


@tracefact.chain
def answer_question(llm: FakeLLM, question: str) -> str:
    search(question)  # remembered: the LLM span below is grounded in these documents
    return llm.generate(question)


def serve(requests: int, hallucination_rate: float, seed: int) -> None:
    """`requests` questions, alternating between two models; the small one degrades half way."""
    large = FakeLLM("fake-llm-1", hallucination_rate, seed)
    mini = FakeLLM("fake-llm-mini", hallucination_rate, seed + 1)
    for i in range(requests):
        if i == requests // 2:
            mini.hallucination_rate = min(1.0, 2 * hallucination_rate)
        answer_question(mini if i % 2 else large, QUESTIONS[i % len(QUESTIONS)])


def print_traces(spans: Sequence[ReadableSpan], limit: int) -> None:
    """The first `limit` requests as small trees; LLM spans with their evaluation."""
    by_trace: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in spans:
        if span.context is not None:
            by_trace[span.context.trace_id].append(span)
    traces = sorted(by_trace.values(), key=lambda t: min(s.start_time or 0 for s in t))
    for trace_spans in traces[:limit]:
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
                print(f"{indent}    model:    {attributes.get('llm.model_name')}")
                print(f"{indent}    question: {attributes.get('input.value')}")
                print(f"{indent}    answer:   {attributes.get('output.value')}")
                print_evaluation(attributes, indent + "    ")
        print()
    if len(traces) > limit:
        print(f"... and {len(traces) - limit} more requests\n")


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
        f"hallucination rate {rate:.1%}, dropped {statuses['dropped']}, "
        f"other statuses {dict((k, v) for k, v in statuses.items() if k not in ('ok', 'dropped'))}"
    )
    # The demo knows which answers it invented: what the evaluator reports beside the truth.
    truth = Counter(
        (
            (s.attributes or {}).get("output.value") in INVENTIONS.values(),
            (s.attributes or {}).get("tracefact.eval.hallucination.label") == "hallucinated",
        )
        for s in spans
        if (s.attributes or {}).get("tracefact.eval.status") == "ok"
    )
    invented = truth[True, True] + truth[True, False]
    true_rate = invented / evaluated if evaluated else 0.0
    print(
        f"true hallucination rate {true_rate:.1%} ({invented} invented answers), "
        f"reported {rate:.1%}: the evaluator missed {truth[True, False]} invented answers "
        f"and flagged {truth[False, True]} grounded ones"
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
    parser.add_argument(
        "--requests", type=int, default=len(QUESTIONS), help="questions to answer (default: 8)"
    )
    parser.add_argument(
        "--spans", metavar="PATH", help="also append every span to PATH (OTLP/JSON lines)"
    )
    args = parser.parse_args(argv)

    shown = InMemorySpanExporter()
    exporters: list[str | SpanExporter] = [shown]
    if args.endpoint:
        exporters.append("otlp")
    if args.spans:
        exporters.append(f"file:{args.spans}")
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
    serve(args.requests, args.hallucination_rate, args.seed)
    tracefact.force_flush()
    print_traces(shown.get_finished_spans(), limit=len(QUESTIONS))
    print_summary(shown.get_finished_spans())
    tracefact.shutdown()
    if args.spans:
        print(f"spans written to {args.spans}")


if __name__ == "__main__":
    main()
