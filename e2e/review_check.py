"""End to end: a rate that is right when the evaluator is wrong, with a real Phoenix.

The demo's app answers questions with two fake LLMs that sometimes invent a fact, so the
truth of every answer is known (an invention or not). A deliberately biased evaluator
judges them in the app (it catches 30% of the inventions and flags 10% of the right
answers), so its rate is known to be off whatever the default evaluator becomes; the app
selects half of the evaluated spans for review in each stratum and exports to a tracefact
collector, which journals the selections, forwards to Phoenix and polls it for labels.
"People" then label 90% of the selected spans through Phoenix's API (HUMAN annotations
named tracefact.review, the truth); the collector pulls them back. The corrected interval
on its /metrics, and the one `tracefact report --phoenix` draws, must hold the true rate,
and the evaluator's own interval must not.

Run by `make e2e` with the project's Python, from the repository root:
    python -m e2e.review_check
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

import httpx
import yaml
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator

import tracefact
from e2e.backend import ROOT, VENVS, Stopwatch, eventually, free_port, running
from e2e.phoenix_check import phoenix_env
from examples import rag_demo
from tracefact.evaluators.base import EvalCase, EvalResult, EvaluatorDescription
from tracefact.monitor.report import build_report
from tracefact.monitor.sources import parse_prometheus_text
from tracefact.review.commands import judged
from tracefact.review.spans import selection

SCREENSHOT = ROOT / "docs" / "img" / "review.png"
REQUESTS = 600
PROBABILITY = 0.5
LABELLED = 0.9
CAUGHT, FALSE_ALARMS = 0.3, 0.1
INVENTIONS = set(rag_demo.INVENTIONS.values())


class Biased:
    """Knows the truth and hides most of it: flags 30% of inventions, 10% of right answers."""

    name = "biased"

    def __init__(self, seed: int = 11) -> None:
        self.random = random.Random(seed)

    def describe(self) -> EvaluatorDescription:
        return EvaluatorDescription(name=self.name, evaluator="biased-e2e")

    async def evaluate(self, case: EvalCase) -> EvalResult:
        invented = case.output in INVENTIONS
        flagged = self.random.random() < (CAUGHT if invented else FALSE_ALARMS)
        return EvalResult(
            name=self.name,
            label="hallucinated" if flagged else "factual",
            score=1.0 if flagged else 0.0,
            evaluator="biased-e2e",
        )


class SeededIds(IdGenerator):
    """Trace and span ids from a seed: the selection (a hash of the span id) is repeatable."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def generate_span_id(self) -> int:
        return self.random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self.random.getrandbits(128) or 1


def collector_config(http: int, grpc: int, phoenix: str, journal: Path) -> dict[str, object]:
    return {
        "receivers": {
            "http": {"host": "127.0.0.1", "port": http},
            "grpc": {"host": "127.0.0.1", "port": grpc},
        },
        "upstreams": [{"endpoint": phoenix}],
        "evaluation": {
            "evaluators": ["lexical"],  # the app evaluated its spans: none is judged here
            "window_seconds": 0.2,
            "review": {
                "probabilities": {"*": PROBABILITY},
                "phoenix_endpoint": phoenix,
                "poll_seconds": 2,
                "state_path": str(journal),
            },
        },
    }


def run_app(collector: str, spans: Path) -> None:
    tracefact.configure(
        service_name="rag-demo",
        exporter=["otlp", f"file:{spans}"],
        endpoint=collector,
        evaluators=[Biased()],
        review_probabilities={"*": PROBABILITY},
        tracer_provider=TracerProvider(id_generator=SeededIds(7)),
    )
    rag_demo.serve(REQUESTS, hallucination_rate=0.35, seed=7)
    assert tracefact.force_flush(60_000)
    tracefact.shutdown()


def label_in_phoenix(client: httpx.Client, spans: Path) -> tuple[float, int, int]:
    """HUMAN annotations (the truth) on 90% of the selected spans.

    Returns the true rate, the spans selected and the spans labelled.
    """
    evaluated = judged(spans)
    truth = {span.key: span.attributes.get("output.value") in INVENTIONS for span in evaluated}
    true_rate = sum(truth.values()) / len(truth)
    selected = [span for span in evaluated if (s := selection(span)) is not None and s.selected]
    people = random.Random(3)
    labelled = [span for span in selected if people.random() < LABELLED]
    for start in range(0, len(labelled), 100):
        data = [
            {
                "span_id": f"{span.key[1]:016x}",
                "name": "tracefact.review",
                "annotator_kind": "HUMAN",
                "result": {"label": "hallucinated" if truth[span.key] else "factual"},
                "metadata": {"reviewer": "e2e"},
            }
            for span in labelled[start : start + 100]
        ]
        client.post("/v1/span_annotations", json={"data": data}).raise_for_status()
    return true_rate, len(selected), len(labelled)


def review_gauges(url: str) -> dict[str, float]:
    samples = parse_prometheus_text(httpx.get(url, timeout=10).text)
    return {s.name: s.value for s in samples if s.name.startswith("tracefact_review_")}


def main() -> None:
    watch = Stopwatch("review")
    phoenix_port, phoenix_grpc = free_port(), free_port()
    http, grpc = free_port(), free_port()
    phoenix = f"http://127.0.0.1:{phoenix_port}"
    collector = f"http://127.0.0.1:{http}"
    with tempfile.TemporaryDirectory(prefix="tracefact-review-") as workdir, ExitStack() as stack:
        work = Path(workdir)
        with watch.stage("phoenix"):
            command = [str(VENVS / "phoenix" / "bin" / "phoenix"), "serve"]
            env = phoenix_env(phoenix_port, phoenix_grpc, workdir)
            stack.enter_context(running(command, env, f"{phoenix}/healthz", work / "phoenix.log"))
        with watch.stage("collector"):
            config = work / "collector.yaml"
            journal = work / "review.journal"
            config.write_text(yaml.safe_dump(collector_config(http, grpc, phoenix, journal)))
            tracefact_bin = str(Path(sys.executable).parent / "tracefact")
            command = [tracefact_bin, "collector", "--config", str(config)]
            stack.enter_context(running(command, {}, f"{collector}/readyz", work / "c.log"))
        spans = work / "spans.jsonl"
        with watch.stage("app"):
            run_app(collector, spans)
        client = stack.enter_context(httpx.Client(base_url=phoenix, timeout=30))
        with watch.stage("tracefact review: the export and Phoenix ready for reviewers"):
            exported = work / "to-review.jsonl"
            subprocess.run(
                [tracefact_bin, "review", str(spans), "--out", str(exported), "--phoenix", phoenix],
                check=True,
                timeout=120,
            )
            assert len(exported.read_text(encoding="utf-8").splitlines()) >= 200
            configs = client.get("/v1/projects/default/annotation_configs").json()["data"]
            assert [c["name"] for c in configs] == ["tracefact.review"], configs
        with watch.stage("people label in Phoenix"):
            true_rate, selected, labelled = label_in_phoenix(client, spans)
            assert selected >= 200, f"only {selected} spans selected"
        with watch.stage("labels back through the collector"):

            def all_labels() -> dict[str, float]:
                gauges = review_gauges(f"{collector}/metrics")
                assert gauges.get("tracefact_review_labels") == labelled, gauges
                return gauges

            gauges = eventually(all_labels, timeout=180, interval=2)
        with watch.stage("checks"):
            report = build_report(spans)
            (alone,) = report.overall
            assert alone.rate is not None
            rate = gauges["tracefact_review_rate"]
            lower = gauges["tracefact_review_rate_lower"]
            upper = gauges["tracefact_review_rate_upper"]
            print(
                f"[review] true rate {true_rate:.3f}; corrected {rate:.3f}"
                f" [{lower:.3f}, {upper:.3f}] on /metrics from {labelled} labels of {selected} "
                f"selected; the evaluator alone {alone.rate:.3f} [{alone.lower:.3f}, "
                f"{alone.upper:.3f}]",
                flush=True,
            )
            assert gauges["tracefact_review_shown"] == 1, gauges
            assert lower <= true_rate <= upper, (true_rate, gauges)
            assert not alone.lower <= true_rate <= alone.upper, (true_rate, alone)
            page = work / "report.html"
            labels_json = subprocess.run(
                [tracefact_bin, "labels", str(spans), "--phoenix", phoenix, "--json"],
                check=True,
                capture_output=True,
                text=True,
                timeout=120,
            ).stdout
            (estimate,) = json.loads(labels_json)
            assert estimate["lower"] <= true_rate <= estimate["upper"], estimate
            subprocess.run(
                [tracefact_bin, "report", str(spans), "--html", str(page), "--phoenix", phoenix],
                check=True,
                timeout=120,
            )
            html = page.read_text(encoding="utf-8")
            section = html[html.index("The evaluator against people") :]
            assert f"{100 * estimate['rate']:.1f}%" in section, "the corrected rate in the report"
        with watch.stage("the section in a browser"):
            browser = [str(VENVS / "browser" / "bin" / "python"), "-m", "e2e.review_browser"]
            subprocess.run([*browser, str(page), str(SCREENSHOT)], check=True, timeout=120)
        with watch.stage("stop"):
            stack.close()
    watch.report()


if __name__ == "__main__":
    main()
