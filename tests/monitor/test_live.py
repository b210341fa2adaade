"""The live monitor in the pipeline: spans in through a real tracer, metrics scraped out."""

from __future__ import annotations

import socket
from collections import defaultdict
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import tracefact
from tests.conftest import Spans
from tests.pipeline.helpers import Pipeline, ScriptedEvaluator
from tracefact import semconv
from tracefact.monitor import RateEstimator
from tracefact.monitor.live import RateMonitor
from tracefact.prometheus import PrometheusMetrics
from tracefact.sampling import Always, Ratio, Rule

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scraped(text: str) -> Samples:
    """Every sample of a Prometheus text page by name and labels."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name, frozenset(sample.labels.items())] = sample.value
    return samples


def series(samples: Samples, name: str, **labels: str) -> float:
    matching = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
    assert len(matching) == 1, (name, labels, [k for k in samples if k[0] == name])
    return matching[0]


@pytest.fixture
def endpoint() -> Iterator[PrometheusMetrics]:
    metrics = PrometheusMetrics()
    yield metrics
    metrics.shutdown()


def test_counters_add_up_to_the_exported_spans(endpoint: PrometheusMetrics) -> None:
    """A risky route judged fully and the rest at 25%: the counters weigh each span."""
    monitor = RateMonitor(RateEstimator(group_by=("route",)), endpoint.meter_provider)
    pipeline = Pipeline(
        sampler=Rule({"http.route": "/risky"}, then=Always()) | Ratio(0.25),
        observers=[monitor],
    )
    try:
        for i in range(200):
            route = "/risky" if i % 4 == 0 else "/faq"
            output = "hallucinated" if i % 8 == 0 or i % 20 == 1 else "ok"
            pipeline.llm_span(output=output, **{"http.route": route})
        assert pipeline.flush()
    finally:
        pipeline.close()
    expected: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for span in pipeline.exported():
        attributes = span.attributes or {}
        if attributes[semconv.EVAL_STATUS] != "ok":
            continue
        w = 1 / float(attributes[semconv.EVAL_SAMPLE_RATE])  # type: ignore[arg-type]
        y = attributes[semconv.eval_attribute("hallucination", "label")] == "hallucinated"
        sums = expected[str(attributes["http.route"])]
        sums[0] += w
        sums[1] += w * y
        sums[2] += w * w
    assert expected["/risky"][0] == 50  # every risky span, weight 1
    assert 0 < expected["/faq"][0] < 150 * 3  # a quarter of the rest, weight 4 each

    samples = scraped(endpoint.render().decode())
    for route, (weight, hallucinated, squared) in expected.items():
        labels = {"route": route, "evaluator": "hallucination"}
        assert series(samples, "tracefact_monitor_weight_total", **labels) == pytest.approx(weight)
        assert series(
            samples, "tracefact_monitor_hallucinated_weight_total", **labels
        ) == pytest.approx(hallucinated)
        assert series(samples, "tracefact_monitor_weight_squared_total", **labels) == pytest.approx(
            squared
        )
        assert series(samples, "tracefact_monitor_rate", **labels) == pytest.approx(
            hallucinated / weight
        )
        lower = series(samples, "tracefact_monitor_rate_lower", **labels)
        upper = series(samples, "tracefact_monitor_rate_upper", **labels)
        assert lower <= hallucinated / weight <= upper  # equal at 0 when none hallucinated
        assert lower < upper
    judged = series(samples, "tracefact_monitor_spans_total", route="/risky", status="ok")
    assert judged == 50


def test_dropped_spans_count_against_coverage_with_their_weight() -> None:
    estimator = RateEstimator(group_by=("model",), evaluators=["hallucination"])
    pipeline = Pipeline(
        sampler=Ratio(1.0), observers=[RateMonitor(estimator)], queue_size=1, max_hold_seconds=5
    )
    try:
        with pipeline.tracer.start_as_current_span("outer"):
            first = pipeline.tracer.start_span(
                "slow",
                attributes={
                    semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_LLM,
                    semconv.LLM_MODEL_NAME: "m",
                },
            )  # holds the only slot while open
            pipeline.llm_span(output="ok", **{semconv.LLM_MODEL_NAME: "m"})
            first.set_attribute(semconv.INPUT_VALUE, "q")
            first.set_attribute(semconv.OUTPUT_VALUE, "hallucinated")
            first.set_attribute(semconv.CONTEXTS, ["c"])
            first.end()
        assert pipeline.flush()
    finally:
        pipeline.close()
    statuses = sorted(
        str(s.attributes[semconv.EVAL_STATUS]) for s in pipeline.exported() if s.name != "outer"
    )
    assert statuses == ["dropped", "ok"]
    (estimate,) = estimator.estimates()
    assert estimate.rate == 1.0
    assert estimate.totals.unjudged == {"dropped": 1}
    assert estimate.coverage == 0.5


@pytest.mark.parametrize("attach", ["enrich", "span"])
def test_results_after_the_hold_limit_are_judged_in_their_group(attach: str) -> None:
    """A span released as `timeout`, or exported at once, counts when its result comes."""
    estimator = RateEstimator(group_by=("model",))
    pipeline = Pipeline(
        [ScriptedEvaluator()],
        observers=[RateMonitor(estimator)],
        attach=attach,
        max_hold_seconds=0.05,
    )
    try:
        pipeline.llm_span(output="slow:0.4", **{semconv.LLM_MODEL_NAME: "m"})
        assert pipeline.flush()
    finally:
        pipeline.close()
    (estimate,) = estimator.estimates()
    assert estimate.group == {"model": "m"}
    assert (estimate.totals.judged, estimate.totals.unjudged) == (1, {})


def test_a_failing_observer_costs_no_span() -> None:
    class Broken:
        def observe(self, record: object, verdict: object) -> None:
            raise RuntimeError("monitor bug")

    with Pipeline(observers=[Broken()]) as pipeline:
        pipeline.llm_span(output="ok")
        assert pipeline.flush()
    (span,) = pipeline.exported()
    assert span.attributes[semconv.EVAL_STATUS] == "ok"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@tracefact.llm(name="answer", model="small-model")
def answer(question: str, contexts: list[str]) -> str:
    return "Paris is the capital of France."


def test_configure_serves_the_rate_to_prometheus(spans: Spans) -> None:
    port = free_port()
    for _ in range(2):  # configuring again frees the port for the new endpoint
        spans.reconfigure(
            evaluators=[ScriptedEvaluator()],
            prometheus_port=port,
            monitor_group_by=["service", "model"],
        )
    for _ in range(3):
        answer("capital?", ["Paris is the capital of France."])
    assert len(spans.all()) == 3
    samples = scraped(httpx.get(f"http://127.0.0.1:{port}/metrics").text)
    # the service of the tracer provider the fixture set up, read off the span's resource
    labels = {"service": "tracefact-tests", "model": "small-model", "evaluator": "hallucination"}
    assert series(samples, "tracefact_monitor_weight_total", **labels) == 3
    assert series(samples, "tracefact_monitor_rate", **labels) == 0.0
    assert series(samples, "tracefact_eval_spans_total", status="ok") == 3
    tracefact.shutdown()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_prometheus_port_refuses_a_meter_provider(spans: Spans) -> None:
    with pytest.raises(ValueError, match="prometheus_port"):
        tracefact.configure(
            exporter="none", prometheus_port=0, meter_provider=PrometheusMetrics().meter_provider
        )
    with pytest.raises(ValueError, match="monitor_max_groups"):
        tracefact.configure(exporter="none", monitor_max_groups=0)
    with pytest.raises(TypeError, match="monitor_group_by"):
        tracefact.configure(exporter="none", monitor_group_by=[1])  # type: ignore[list-item]


def test_the_gauges_follow_the_latest_monitor_of_a_provider(endpoint: PrometheusMetrics) -> None:
    old = RateMonitor(RateEstimator(group_by=("route",)), endpoint.meter_provider)
    with Pipeline(observers=[old]) as pipeline:
        pipeline.llm_span(output="hallucinated", **{"http.route": "/old"})
        assert pipeline.flush()
    assert series(scraped(endpoint.render().decode()), "tracefact_monitor_rate", route="/old") == 1
    RateMonitor(RateEstimator(group_by=("route",)), endpoint.meter_provider)  # re-configured
    samples = scraped(endpoint.render().decode())
    assert not [k for k in samples if k[0] == "tracefact_monitor_rate"]
    # the counters are cumulative for the process: they keep what the old one counted
    assert series(samples, "tracefact_monitor_weight_total", route="/old") == 1


def test_a_sinks_counts_reach_the_configured_prometheus_endpoint(spans: Spans) -> None:
    """A sink made before configure() counts in configure's meter provider, not the global."""
    from tracefact.sinks import PhoenixAnnotations

    port = free_port()
    dead = f"http://127.0.0.1:{free_port()}"
    sink = PhoenixAnnotations(dead, max_retries=0, timeout_seconds=1.0)
    spans.reconfigure(evaluators=[ScriptedEvaluator()], prometheus_port=port, sinks=[sink])
    for _ in range(3):
        answer("capital?", ["Paris is the capital of France."])
    tracefact.force_flush(5_000)  # the sink's backend is down: its results are counted
    samples = scraped(httpx.get(f"http://127.0.0.1:{port}/metrics").text)
    failed = {"sink": "phoenix-annotations", "outcome": "failed"}
    assert series(samples, "tracefact_sink_results_total", **failed) == 3


class FailingFlush:
    """A custom sink whose flush raises: the application's force_flush must not."""

    name = "failing-flush"

    def submit(self, evaluated: object) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        raise RuntimeError("flush failed")

    def shutdown(self) -> None:
        pass


def test_a_sink_whose_flush_raises_costs_the_caller_nothing(spans: Spans) -> None:
    spans.reconfigure(evaluators=[ScriptedEvaluator()], sinks=[FailingFlush()])
    answer("capital?", ["Paris is the capital of France."])
    assert tracefact.force_flush(5_000) is False
    assert len(spans.exporter.get_finished_spans()) == 1
