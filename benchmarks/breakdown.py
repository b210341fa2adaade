"""Where the time of issue 30's rows goes: tracefact's code, OpenTelemetry's SDK, Python.

The SDK's rows (the application's thread) are split by taking parts away, so nothing is
added to the code timed: thread CPU per call of each variant, interleaved, min and median
over rounds (`sdk.measure`).

- `raw`: a hand-written span with the same facts on a BatchSpanProcessor: OpenTelemetry's
  SDK and Python only (the like-for-like rows' reference).
- `off`: `@tracefact.llm`, evaluation off; minus `raw`: the decorator's own code.
- `ratio0`: evaluation on, sampled out; minus `off`: the evaluation processor's path for a
  sampled-out LLM span (role, admission, the sampler, its status written, counted).
- On one ended LLM span, `on_start` + `on_end` of the evaluation processor (sampled out)
  against tracefact's export stage alone; on web and `db.system` spans the processor
  `configure()` installs against the export stage alone and a BatchSpanProcessor.

The collector's rows (`--collector`) are split by profiling every thread of an in-process
collector with yappi on its CPU clock (`pip install yappi`; it is in no lock file): each
function's own time goes to where its code lives (tracefact, OpenTelemetry, httpx/httpcore/
h11, http.server and email, asyncio and the rest of the standard library, protobuf), and a
C function's (`isinstance`, socket calls, upb parsing) to its caller's. yappi slows Python
calls more than C ones, so shares are shown, scaled to the thread CPU measured without it.

    python benchmarks/breakdown.py [--calls 2000] [--rounds 9] [--collector]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind

from benchmarks import sdk

RECEIVER = "receiver (its event loop thread) and the rest"
DEEP = {"export_queue_size": 1_000_000, "queue_size": 1_000_000}


def _ns(samples: list[float]) -> str:
    return f"{min(samples):7.0f} {statistics.median(samples):7.0f}"


def app_thread(calls: int, rounds: int) -> None:
    """The SDK rows' parts, in ns of thread CPU per call (min, median)."""
    import tracefact
    from tracefact import _configure
    from tracefact.sampling import Ratio

    decorated = tracefact.llm(model=sdk.MODEL)(sdk.call)

    def traced() -> str:
        return decorated(sdk.QUESTION, sdk.CONTEXTS)

    flush = tracefact.force_flush
    variants = {
        "raw": sdk.raw_variant(BatchSpanProcessor(sdk.Discard(), max_queue_size=1_000_000)),
        "off": sdk.Variant(traced, sdk.configured(evaluators=[], **DEEP), flush),
        "ratio0": sdk.Variant(
            traced,
            sdk.configured(evaluators=[sdk.Instant()], sampler=Ratio(0.0), **DEEP),
            flush,
        ),
    }
    calls_of = sdk.measure(variants, calls, rounds)
    raw, off, ratio0 = (calls_of[k] for k in ("raw", "off", "ratio0"))

    # The processors alone, on spans as they end: the LLM span's under Ratio(0.0) first,
    # then the non-LLM spans' under the default configuration.
    sdk.configured(evaluators=[sdk.Instant()], sampler=Ratio(0.0), **DEEP)()
    assert _configure._installation is not None
    switch = _configure._installation.switch
    processor = switch.downstream  # the evaluation processor
    ended: list[Any] = []
    end = switch.on_end

    def keep(span: Any) -> None:
        ended.append(span)
        end(span)

    switch.on_end = keep  # type: ignore[method-assign]
    traced()
    switch.on_end = end  # type: ignore[method-assign]
    by_part = _through(
        {
            "llm: evaluation processor (sampled out)": (processor, ended[0]),
            "llm: export stage alone": (processor.downstream, ended[0]),  # type: ignore[attr-defined]
        },
        calls,
        rounds,
    )
    sdk.configured(**DEEP)()
    bare = BatchSpanProcessor(sdk.Discard(), max_queue_size=1_000_000)
    export = switch.downstream.downstream  # type: ignore[attr-defined]
    web = sdk.ended_span(
        "GET /answer",
        SpanKind.SERVER,
        {"http.request.method": "GET", "url.path": "/answer", "http.route": "/answer"},
    )
    db = sdk.ended_span(
        "SELECT docs",
        SpanKind.CLIENT,
        {"db.system": "postgresql", "db.statement": "SELECT body FROM docs WHERE id = $1"},
    )
    parts: dict[str, tuple[Any, Any]] = {}
    for kind, span in (("web", web), ("db", db)):
        parts[f"{kind}: installed processor"] = (switch, span)
        parts[f"{kind}: export stage alone"] = (export, span)
        parts[f"{kind}: BatchSpanProcessor"] = (bare, span)
    by_part.update(_through(parts, calls, rounds))
    tracefact.shutdown()

    print("## The application's thread (ns of thread CPU per call: min, median)\n")
    print("```")
    print(f"raw span, BatchSpanProcessor (OTel SDK + Python)   {_ns(raw)}")
    print(f"@tracefact.llm, evaluation off                     {_ns(off)}")
    print(f"@tracefact.llm, Ratio(0.0)                         {_ns(ratio0)}")
    print(f"  decorator's own code (off - raw)                 {_difference(off, raw)}")
    print(f"  sampled-out path (Ratio(0.0) - off)              {_difference(ratio0, off)}")
    for name, samples in by_part.items():
        print(f"{name:51s}{_ns(samples)}")
    print("```\n")


def _through(parts: dict[str, tuple[Any, Any]], calls: int, rounds: int) -> dict[str, list[float]]:
    """Each processor's on_start + on_end on its span, per call."""
    variants = {
        name: sdk.Variant(sdk.through(p, span), settle=p.force_flush)
        for name, (p, span) in parts.items()
    }
    return sdk.measure(variants, calls * 5, rounds)


def _difference(a: list[float], b: list[float]) -> str:
    return (
        f"{min(a) - min(b):7.0f} {statistics.median(a) - statistics.median(b):7.0f}"
        f"   ({min(a) / min(b) - 1:+.0%} of the reference)"
    )


# --- the collector -------------------------------------------------------------------------


def _category(module: str) -> str:
    for marker, name in (
        ("/tracefact/", "tracefact"),
        ("benchmarks", "the benchmark's evaluator"),
        ("/opentelemetry/", "OpenTelemetry SDK"),
        ("/httpx/", "httpx/httpcore/h11"),
        ("/httpcore/", "httpx/httpcore/h11"),
        ("/h11/", "httpx/httpcore/h11"),
        ("/google/", "protobuf"),
        ("/http/", "http.server/http.client/email"),
        ("/email/", "http.server/http.client/email"),
        ("/socketserver", "http.server/http.client/email"),
        ("/asyncio/", "asyncio"),
    ):
        if marker in module:
            return name
    return "Python: rest of the standard library"


_UPB = ("FromString", "SerializeToString", "ParseFromString", "MergeFromString", "ByteSize")


def _is_c(stat: Any) -> bool:
    return bool(stat.builtin) or stat.lineno == 0 or not stat.module.endswith(".py")


def _split(stats: Any) -> Counter[str]:
    """Own time by where the code lives; a C function's own time goes to its caller's."""
    shares: Counter[str] = Counter()
    for stat in stats:
        if not _is_c(stat):
            shares[_category(stat.module)] += stat.tsub
        for child in stat.children:
            if _is_c(child):  # its own time: what it calls is profiled in its own right
                upb = child.name.endswith(_UPB) or "upb" in child.full_name
                shares["protobuf (upb)" if upb else _category(stat.module)] += child.tsub
    return shares


def collector_threads(batches: int) -> None:
    """Each collector row's threads, their CPU split by yappi (scaled to the CPU measured)."""
    import subprocess
    import threading

    try:
        import yappi  # type: ignore[import-not-found]
    except ImportError:
        raise SystemExit("--collector needs yappi (pip install yappi)") from None
    from benchmarks import collector as bc

    process = subprocess.Popen(
        [sys.executable, bc.__file__, "--upstream"], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    upstream = f"http://127.0.0.1:{process.stdout.readline().strip()}"
    print("## The collector (yappi, CPU clock; shares scaled to the CPU measured without it)\n")
    try:
        for evaluating, kind, per in ((False, "plain", 1), (True, "llm", 4)):
            templates = bc.batches(kind, batches, seed=5 if kind == "plain" else 11)
            spans = batches * bc.BATCH_SPANS // per
            collector, ingest = bc._in_process_collector(upstream, evaluating, spans * 2)
            try:
                # A warm-up, then the same traffic timed without and with the profiler.
                cpu: dict[str, float] = {}
                names: dict[int, str] = {}
                for round_, profiled in ((1, False), (2, False), (3, True)):
                    bodies = [bc.restamp(b, round_) for b in templates]
                    before = _threads_cpu()
                    if profiled:
                        yappi.set_clock_type("cpu")
                        yappi.start(builtins=True)
                    process_cpu = bc._posted_cpu(ingest, upstream, bodies)
                    if profiled:
                        names = {
                            t.ident: t.name for t in threading.enumerate() if t.ident is not None
                        }
                        yappi.stop()
                    elif round_ == 2:
                        after = _threads_cpu()
                        cpu = {n: after[n] - before.get(n, 0.0) for n in after}
                        # The receiver's loop and whatever else is not grouped: the rest
                        # of the process's CPU (the poster's own is taken out).
                        cpu[RECEIVER] = process_cpu - sum(
                            v for n, v in cpu.items() if n != RECEIVER
                        )
            finally:
                collector.shutdown()
            _print_threads(yappi, names, cpu, spans, evaluating)
            yappi.clear_stats()
    finally:
        process.kill()
        process.wait()


def _threads_cpu() -> dict[str, float]:
    import contextlib
    import threading

    out: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.ident is None or thread is threading.main_thread():
            continue
        with contextlib.suppress(OSError):
            key = _thread_group(thread.name)
            clock = time.pthread_getcpuclockid(thread.ident)
            out[key] = out.get(key, 0.0) + time.clock_gettime(clock)
    return out


def _thread_group(name: str) -> str:
    """Threads by job: the receiver's loop and any other thread are one group."""
    for prefix in ("tracefact-engine", "tracefact-evaluation", "tracefact-forward"):
        if name.startswith(prefix):
            return prefix
    return RECEIVER


def _print_threads(
    yappi: Any, names: dict[int, str], cpu: dict[str, float], spans: int, evaluating: bool
) -> None:
    unit = "LLM span" if evaluating else "span"
    row = "LLM spans to an instant evaluator" if evaluating else "pass-through, evaluation off"
    print(f"### {row} (µs of CPU per {unit}, measured without the profiler)\n")
    print("```")
    grouped: dict[str, Counter[str]] = {}
    for thread in yappi.get_thread_stats():
        if thread.name == "_MainThread":
            continue  # the poster
        group = _thread_group(names.get(thread.tid, thread.name))
        stats = yappi.get_func_stats(filter={"ctx_id": thread.id})
        grouped.setdefault(group, Counter()).update(_split(stats))
    for group, shares in sorted(grouped.items()):
        measured = cpu.get(group, 0.0) / spans * 1e6
        total = sum(shares.values()) or 1.0
        print(f"{group}: {measured:.2f} µs")
        for category, value in shares.most_common():
            share = value / total
            if share >= 0.005:
                print(f"    {category:40s} {share:5.0%} {share * measured:8.2f} µs")
    print("```\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batches", type=int, default=40, help="batches per collector run")
    parser.add_argument("--collector", action="store_true", help="the collector's rows too")
    args = parser.parse_args()
    app_thread(args.calls, args.rounds)
    if args.collector:
        collector_threads(args.batches)


if __name__ == "__main__":
    main()
