"""The collector's result sinks: the SDK's sinks, configured in YAML, counted on /metrics.

`tracefact collector` with `evaluation.sinks`, a real fake Phoenix (its span annotations
API) and a real upstream receiver; with a SQLite queue, a collector killed before its
sink delivered leaves the request in the queue, and the next one delivers it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.collector.harness import wait_until
from tests.collector.queues.processes import (
    LLM_SPAN,
    config,
    counter,
    kill,
    send,
    span_id,
    sqlite_keys,
    start,
    stop,
    trace_requests,
)
from tests.fakes.json_api import Scripted, json_api
from tests.fakes.otlp import otlp_receiver
from tests.fakes.phoenix_server import fake_phoenix
from tracefact import semconv

TRACES = range(0x7A11_0001, 0x7A11_0004)


def with_sinks(settings: dict[str, Any], *sinks: dict[str, Any]) -> dict[str, Any]:
    """The processes' configuration with a fast evaluator and the given sinks."""
    evaluation = {**settings["evaluation"], "evaluators": ["lexical"], "sinks": list(sinks)}
    return {**settings, "evaluation": evaluation}


def phoenix_sink(endpoint: str) -> dict[str, Any]:
    return {"type": "phoenix", "endpoint": endpoint, "max_retries": 20, "drain_seconds": 1}


def annotated_spans(annotations: list[dict[str, Any]]) -> set[str]:
    return {a["span_id"] for a in annotations}


def llm_span_ids() -> set[str]:
    return {span_id(trace, LLM_SPAN).hex() for trace in TRACES}


def test_phoenix_annotations_through_the_collector(tmp_path: Path) -> None:
    with otlp_receiver() as upstream, fake_phoenix() as phoenix:
        settings = with_sinks(config(upstream.endpoint, 0), phoenix_sink(phoenix.base_url))
        collector = start("collector", tmp_path / "tracefact.yaml", settings)
        try:
            for trace in TRACES:
                send(collector, trace_requests(trace, together=True))
            assert wait_until(lambda: annotated_spans(phoenix.annotations) == llm_span_ids())
            annotation = phoenix.annotations[0]
            assert annotation["name"] == "hallucination"
            assert annotation["annotator_kind"] == "CODE"
            assert annotation["result"]["label"] in ("factual", "hallucinated")
            assert wait_until(
                lambda: counter(collector, semconv.METRIC_SINK_RESULTS) == len(TRACES)
            )
        finally:
            stop([collector])


def test_a_result_not_delivered_before_a_crash_is_delivered_after_restart(
    tmp_path: Path,
) -> None:
    """SIGKILL while Phoenix refuses: the entry stays in SQLite, the next run delivers it."""
    trace = TRACES[0]
    with otlp_receiver() as upstream, json_api() as refusing, fake_phoenix() as phoenix:
        refusing.route("POST", "/v1/span_annotations", lambda request: Scripted(503))
        durable = sqlite_keys(tmp_path)
        first = start(
            "collector",
            tmp_path / "first.yaml",
            with_sinks(
                {**config(upstream.endpoint, 0), **durable}, phoenix_sink(refusing.base_url)
            ),
        )
        try:
            send(first, trace_requests(trace, together=True))
            # Evaluated and forwarded upstream, its annotation refused and being retried.
            assert wait_until(lambda: span_id(trace, LLM_SPAN) in upstream_ids(upstream))
            assert wait_until(lambda: len(refusing.requests) >= 2)
        finally:
            kill(first)
        second = start(
            "collector",
            tmp_path / "second.yaml",
            with_sinks({**config(upstream.endpoint, 0), **durable}, phoenix_sink(phoenix.base_url)),
        )
        try:
            expected = {span_id(trace, LLM_SPAN).hex()}
            assert wait_until(lambda: annotated_spans(phoenix.annotations) == expected)
        finally:
            stop([first, second])
    [again] = second.events("redelivered")  # the log says why the spans may come twice
    assert again["delivery"] == 2 and again["spans"] == 3


def upstream_ids(upstream: Any) -> set[bytes]:
    return {span.span_id for _, span in upstream.spans()}
