"""What tracefact costs the application's thread, as ratios measured in one process.

Every figure is thread CPU time (`time.thread_time_ns`) of the calling thread, so the
export and evaluation threads, and other load on a shared machine, barely move it. The
variants of a row run interleaved, in rounds of `--calls` calls each; a row's ratio is
taken from the same rounds: min over rounds, then median over rounds, of each side.

Rows (the table of issue 30; `--table` prints them as `| path | measured | goal |`):

1. Peer harness: each library's decorator around the same call, recording the question,
   the contexts, the answer and the model, against a raw OTel span recording the same on
   a SimpleSpanProcessor. tracefact is configured as users run it (the default evaluator,
   `sample_rate=0.0`: the span sampled out); traceloop (`@task`), OpenInference
   (`OITracer.llm`) and logfire (`@logfire.instrument`) each export through a
   BatchSpanProcessor, as they do by default. Each library runs in its own process beside
   its own reference (they all claim the global tracer provider), started with
   `--peers-python` (the bench environment, `make bench`); the ratio is that process's.
2. Like for like: a raw span recording the same facts on a BatchSpanProcessor, against
   `@tracefact.llm` with evaluation off, with evaluation on and the span sampled out
   (`Ratio(0.0)`), and judged by an evaluator that answers at once (the app thread only).
3. Spans that are not LLM spans (a web request, a `db.system` query): the installed
   processor's on_start + on_end against a bare BatchSpanProcessor's.

Every exporter discards. Numbers are printed, nothing is asserted.

    python benchmarks/sdk.py [--table] [--calls 2000] [--rounds 15]
                             [--peers-python .venv-bench/bin/python] [--peer NAME]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import SpanKind

QUESTION = "When was the Eiffel Tower completed, and how tall is it?"
CONTEXTS = [
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
    "It is 330 metres tall, and was the tallest structure in the world until 1930.",
]
ANSWER = "It was completed in 1889 and is 330 metres tall."
MODEL = "gpt-4o-mini"
PEERS = ("tracefact", "traceloop", "openinference", "logfire")


class Discard(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class Instant:
    """An evaluator that answers at once: what is left is tracefact's own work."""

    name = "hallucination"

    def describe(self) -> Any:
        from tracefact.evaluators.base import EvaluatorDescription

        return EvaluatorDescription(name=self.name, evaluator="instant")

    async def evaluate(self, case: Any) -> Any:
        from tracefact.evaluators.base import EvalResult

        return EvalResult(name=self.name, label="factual", score=0.1, evaluator="instant")


def call(question: str, contexts: list[str]) -> str:
    """The call every variant wraps: the model's work itself costs nothing here."""
    return ANSWER


# --- timing --------------------------------------------------------------------------------


@dataclass
class Variant:
    """One way of making the call; `setup` and `settle` run around each round, untimed."""

    run: Callable[[], object]
    setup: Callable[[], object] = lambda: None
    settle: Callable[[], object] = lambda: None


def measure(variants: dict[str, Variant], calls: int, rounds: int) -> dict[str, list[float]]:
    """Per-call thread CPU ns of each variant in each round, the variants interleaved."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for index in range(rounds):
        # Rotate the order each round: no variant always runs after the same neighbour.
        for name in names[index % len(names) :] + names[: index % len(names)]:
            variant = variants[name]
            variant.setup()
            gc.collect()
            run = variant.run
            start = time.thread_time_ns()
            for _ in range(calls):
                run()
            samples[name].append((time.thread_time_ns() - start) / calls)
            variant.settle()
    return samples


@dataclass(frozen=True)
class Ratio:
    subject: list[float]
    reference: list[float]

    def measured(self) -> str:
        low = min(self.subject) / min(self.reference)
        middle = statistics.median(self.subject) / statistics.median(self.reference)
        return (
            f"{low:.2f}x min, {middle:.2f}x median "
            f"({min(self.subject) / 1000:.1f} vs {min(self.reference) / 1000:.1f} µs)"
        )

    def to_json(self) -> dict[str, list[float]]:
        return {"subject": self.subject, "reference": self.reference}


# --- 1. the peer harness (one library per process) ---------------------------------------


def peer_variant(name: str) -> Variant:
    """`name`'s decorator around `call`, each exporting the way it does by default."""
    if name == "tracefact":
        import tracefact

        tracefact.configure(service_name="bench", exporter=Discard(), sample_rate=0.0)
        decorated = tracefact.llm(model=MODEL)(call)
        return Variant(lambda: decorated(QUESTION, CONTEXTS), settle=tracefact.force_flush)
    if name == "traceloop":
        from traceloop.sdk import Traceloop
        from traceloop.sdk.decorators import task

        Traceloop.init(
            app_name="bench", exporter=Discard(), telemetry_enabled=False, instruments=set()
        )

        @task(name="answer")
        def answer(question: str, contexts: list[str]) -> str:
            trace.get_current_span().set_attribute("gen_ai.request.model", MODEL)
            return call(question, contexts)

        provider = trace.get_tracer_provider()
        return Variant(lambda: answer(QUESTION, CONTEXTS), settle=provider.force_flush)  # type: ignore[attr-defined]
    if name == "openinference":
        from openinference.instrumentation import OITracer, TraceConfig

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Discard()))
        tracer = OITracer(provider.get_tracer("bench"), config=TraceConfig())

        @tracer.llm(name="answer")
        def oi_answer(question: str, contexts: list[str]) -> str:
            trace.get_current_span().set_attribute("llm.model_name", MODEL)
            return call(question, contexts)

        return Variant(lambda: oi_answer(QUESTION, CONTEXTS), settle=provider.force_flush)
    if name == "logfire":
        import logfire

        logfire.configure(
            send_to_logfire=False,
            console=False,
            service_name="bench",
            additional_span_processors=[BatchSpanProcessor(Discard())],
        )

        @logfire.instrument("answer", extract_args=True, record_return=True)
        def lf_answer(question: str, contexts: list[str]) -> str:
            trace.get_current_span().set_attribute("gen_ai.request.model", MODEL)
            return call(question, contexts)

        return Variant(lambda: lf_answer(QUESTION, CONTEXTS), settle=logfire.force_flush)
    raise ValueError(f"unknown peer {name!r}")


def raw_variant(processor: SpanProcessor) -> Variant:
    """A hand-written span recording the same facts as `@tracefact.llm`, on `processor`."""
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")

    def raw() -> str:
        with tracer.start_as_current_span(
            "answer",
            kind=SpanKind.CLIENT,
            attributes={
                "openinference.span.kind": "LLM",
                "gen_ai.operation.name": "chat",
                "llm.model_name": MODEL,
                "input.value": QUESTION,
                "tracefact.contexts": CONTEXTS,
            },
        ) as span:
            result = call(QUESTION, CONTEXTS)
            span.set_attribute("output.value", result)
            return result

    return Variant(raw, settle=provider.force_flush)


def peer_main(name: str, calls: int, rounds: int) -> None:
    """Run in a child process: one peer against the reference, the ratio as JSON."""
    variants = {
        "reference": raw_variant(SimpleSpanProcessor(Discard())),
        name: peer_variant(name),
    }
    samples = measure(variants, calls, rounds)
    print(json.dumps(Ratio(samples[name], samples["reference"]).to_json()))


def peers(python: str, calls: int, rounds: int) -> dict[str, Ratio]:
    out: dict[str, Ratio] = {}
    for name in PEERS:
        done = subprocess.run(
            [python, __file__, "--peer", name, "--calls", str(calls), "--rounds", str(rounds)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            raise SystemExit(f"the {name} peer failed ({done.returncode})")
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        out[name] = Ratio(answer["subject"], answer["reference"])
    return out


# --- 2. and 3. like for like, and spans that are not LLM spans -----------------------------


def configured(**options: Any) -> Callable[[], object]:
    """A `setup` that configures tracefact so (untimed; the decorated function is kept)."""
    import tracefact

    def setup() -> None:
        tracefact.configure(service_name="bench", exporter=Discard(), **options)

    return setup


def local_rows(calls: int, rounds: int) -> dict[str, Ratio]:
    import tracefact
    from tracefact import _configure
    from tracefact.sampling import Always
    from tracefact.sampling import Ratio as RatioSampler

    decorated = tracefact.llm(model=MODEL)(call)

    def traced() -> str:
        return decorated(QUESTION, CONTEXTS)

    flush = tracefact.force_flush
    # Deep queues: a round never fills one, so no variant is measured on its drop path.
    deep = {"export_queue_size": 1_000_000, "queue_size": 1_000_000}
    llm_variants = {
        "raw": raw_variant(BatchSpanProcessor(Discard(), max_queue_size=1_000_000)),
        "off": Variant(traced, configured(evaluators=[], **deep), flush),
        "ratio0": Variant(
            traced, configured(evaluators=[Instant()], sampler=RatioSampler(0.0), **deep), flush
        ),
        "instant": Variant(
            traced, configured(evaluators=[Instant()], sampler=Always(), **deep), flush
        ),
    }
    samples = measure(llm_variants, calls, rounds)

    # The processor tracefact installs, as users run it (the default evaluator).
    configured(**deep)()
    assert _configure._installation is not None
    installed = _configure._installation.switch
    bare = BatchSpanProcessor(Discard(), max_queue_size=1_000_000)
    spans = {
        "web": ended_span(
            "GET /answer",
            SpanKind.SERVER,
            {
                "http.request.method": "GET",
                "url.path": "/answer",
                "http.route": "/answer",
                "http.response.status_code": 200,
                "server.address": "127.0.0.1",
            },
        ),
        "db": ended_span(
            "SELECT docs",
            SpanKind.CLIENT,
            {
                "db.system": "postgresql",
                "db.name": "docs",
                "db.statement": "SELECT body FROM docs WHERE id = $1",
            },
        ),
    }
    plain_variants: dict[str, Variant] = {}
    for kind, span in spans.items():
        for who, processor in (("bare", bare), ("tracefact", installed)):
            plain_variants[f"{kind} {who}"] = Variant(
                through(processor, span), settle=processor.force_flush
            )
    plain = measure(plain_variants, calls * 5, rounds)
    tracefact.shutdown()
    return {
        "off": Ratio(samples["off"], samples["raw"]),
        "ratio0": Ratio(samples["ratio0"], samples["raw"]),
        "instant": Ratio(samples["instant"], samples["raw"]),
        "web": Ratio(plain["web tracefact"], plain["web bare"]),
        "db": Ratio(plain["db tracefact"], plain["db bare"]),
    }


def ended_span(name: str, kind: SpanKind, attributes: dict[str, Any]) -> Any:
    """A span as a processor sees it, made on a provider without processors."""
    span = TracerProvider().get_tracer("bench").start_span(name, kind=kind, attributes=attributes)
    span.end()
    return span


def through(processor: SpanProcessor, span: Any) -> Callable[[], None]:
    def run() -> None:
        processor.on_start(span, None)
        processor.on_end(span)

    return run


# --- the table ------------------------------------------------------------------------------


def table(local: dict[str, Ratio], peer: dict[str, Ratio] | None) -> list[str]:
    rows = []
    if peer is not None:
        others = ", ".join(f"{n} {peer[n].measured()}" for n in PEERS if n != "tracefact")
        rows.append(
            "| `@tracefact.llm` vs a raw span on a SimpleSpanProcessor, peer harness "
            "(default evaluator, sampled out) "
            f"| {peer['tracefact'].measured()}; {others} | cheapest of the peers |"
        )
    goals = {
        "off": ("like for like (raw span on a BatchSpanProcessor), evaluation off", "<= 1.15x"),
        "ratio0": ("like for like, evaluation on, sampled out (`Ratio(0.0)`)", "<= 1.15x"),
        "instant": ("like for like, an instant evaluator (app thread only)", "<= 1.5x"),
        "web": ("not LLM spans: processor on_start + on_end vs BatchSpanProcessor, web", "<= 1.1x"),
        "db": ("not LLM spans, `db.system`", "<= 1.1x"),
    }
    for key, (path, goal) in goals.items():
        rows.append(f"| {path} | {local[key].measured()} | {goal} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per variant per round")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--table", action="store_true", help="the rows only, no header")
    parser.add_argument(
        "--peers-python",
        default=str(Path(__file__).resolve().parent.parent / ".venv-bench" / "bin" / "python"),
        help="a Python with traceloop-sdk, openinference-instrumentation and logfire",
    )
    parser.add_argument("--peer", choices=PEERS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer is not None:
        peer_main(args.peer, args.calls, args.rounds)
        return
    peer = None
    if Path(args.peers_python).exists():
        peer = peers(args.peers_python, args.calls, args.rounds)
    else:
        print(f"(no peers: {args.peers_python} is missing; `make bench` builds it)")
    rows = table(local_rows(args.calls, args.rounds), peer)
    if not args.table:
        print(f"{args.rounds} rounds of {args.calls} calls, thread CPU time\n")
        print("| path | measured | goal |\n|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
