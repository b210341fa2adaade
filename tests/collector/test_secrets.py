"""No secret leaves through what the collector writes: metric labels, logs, added attributes.

One `tracefact collector` whose upstream URLs carry a password and a token and key in
their query strings (one upstream down, so its retries are logged), whose live rate is
grouped by model and by a token attribute, and a trace whose retriever span quotes keys
that the collector copies into `tracefact.contexts`.
"""

from __future__ import annotations

from pathlib import Path

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from tests.collector.harness import attributes, base_config, running_collector, wait_until
from tests.fakes.otlp import otlp_receiver
from tracefact import semconv

PASSWORD = "pw9secret1"
KEY = "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0" * 2
AWS = "AKIA" + "QRSTUVWXYZ234567"
TOKEN = "tok-" + "abcdefghijklmnop1234"
QUERY_TOKEN = "q7t0k3nInTheQuery"
QUERY_KEY = "q7k3yInTheQuery"
SECRETS = (PASSWORD, KEY, AWS, TOKEN, QUERY_TOKEN, QUERY_KEY, "hunter2x")


def span(number: int, parent: int | None, **values: str) -> Span:
    return Span(
        trace_id=(0x5EC).to_bytes(16, "big"),
        span_id=number.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big") if parent else b"",
        name=f"span-{number}",
        start_time_unix_nano=1_700_000_000_000_000_000,
        end_time_unix_nano=1_700_000_001_000_000_000,
        attributes=[KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in values.items()],
    )


def test_no_secret_in_metrics_logs_or_added_attributes(tmp_path: Path) -> None:
    with otlp_receiver() as upstream:
        live = upstream.endpoint.replace("http://", f"http://user:{PASSWORD}@")
        live = f"{live}?token={QUERY_TOKEN}&region=eu"
        config = base_config(live, monitor={"group_by": ["model", "user.token"]})
        down = f"http://admin:{PASSWORD}@127.0.0.1:9/?api_key={QUERY_KEY}&sig={QUERY_KEY}"
        config["upstreams"].append({"endpoint": down})
        config["drain_seconds"] = 5
        retriever = span(
            2,
            1,
            **{
                semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_RETRIEVER,
                semconv.retrieval_document(0, semconv.DOCUMENT_CONTENT): (
                    f"The key is {KEY}, the AWS key {AWS}, password=hunter2x."
                ),
            },
        )
        llm = span(
            3,
            1,
            **{
                semconv.OPENINFERENCE_SPAN_KIND: semconv.KIND_LLM,
                semconv.LLM_MODEL_NAME: f"gpt-4o-{KEY}",
                "user.token": TOKEN,
                semconv.INPUT_VALUE: "What is the key?",
                semconv.OUTPUT_VALUE: "The key is a secret.",
            },
        )
        request = ExportTraceServiceRequest(
            resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[retriever, llm])])]
        )
        with running_collector(tmp_path / "tracefact.yaml", config) as collector:
            response = httpx.post(
                f"{collector.http}/v1/traces",
                content=request.SerializeToString(),
                headers={"Content-Type": "application/x-protobuf"},
            )
            assert response.status_code == 200

            def evaluated() -> dict[str, object] | None:
                for _, received in upstream.spans():
                    values = attributes(received)
                    if received.span_id == llm.span_id and semconv.EVAL_STATUS in values:
                        return values
                return None

            assert wait_until(lambda: evaluated() is not None)
            assert wait_until(lambda: collector.events("upstream_retry"))
            assert wait_until(
                lambda: "tracefact_monitor_rate{" in httpx.get(f"{collector.http}/metrics").text
            )
            metrics = httpx.get(f"{collector.http}/metrics").text
        values = evaluated()
        assert values is not None
        contexts = " ".join(values[semconv.CONTEXTS])  # type: ignore[arg-type]
        assert "The key is" in contexts and "[SCRUBBED]" in contexts
        added = {k: v for k, v in values.items() if k.startswith("tracefact.")}
        logs = "".join(collector.lines)
        assert 'upstream="http://user:[SCRUBBED]@127.0.0.1' in metrics
        assert "?token=[SCRUBBED]&region=eu" in metrics
        assert "?api_key=[SCRUBBED]&sig=[SCRUBBED]" in logs
        assert "[SCRUBBED]" in logs
        for secret in SECRETS:
            assert secret not in metrics, secret
            assert secret not in logs, secret
            assert secret not in str(added), secret
