"""`tracefact collector --config`: a bad file is one clear line and exit 2; defaults work."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.collector.harness import (
    TRACEFACT,
    attributes,
    fixture_spans,
    running_collector,
)
from tests.collector.test_evaluation import retriever_span
from tests.fakes.otlp import otlp_receiver
from tracefact import semconv
from tracefact.collector.config import load
from tracefact.errors import ConfigurationError


def run(path: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACEFACT), "collector", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


UPSTREAM = "upstreams:\n  - endpoint: http://127.0.0.1:9\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("receivers: [unclosed", "not valid YAML"),
        ("- a list", "the file must hold a mapping"),
        ("receivers: {}\n", "upstreams: Field required"),
        ("upstreams: []\n", "upstreams: List should have at least 1 item"),
        (
            UPSTREAM + "recievers: {}\n",
            "recievers: unknown key 'recievers'; did you mean 'receivers'?",
        ),
        ("upstreams:\n  - endpoint: ''\n", "upstreams.0.endpoint: must not be empty"),
        ("upstreams:\n  - endpoint: x\n    protocol: ftp\n", "upstreams.0.protocol:"),
        (UPSTREAM + "limits: {max_body_bytes: lots}\n", "limits.max_body_bytes:"),
        (
            "upstreams:\n  - endpoint: ${NO_SUCH_VARIABLE_HERE}\n",
            "upstreams.0.endpoint: environment variable NO_SUCH_VARIABLE_HERE is not set",
        ),
        (
            UPSTREAM + "evaluation: {evaluators: [nosuch]}\n",
            "evaluation.evaluators.0: unknown evaluator 'nosuch'",
        ),
        (
            UPSTREAM + "evaluation: {evaluators: [{import: 'no_such_module:make'}]}\n",
            "evaluation.evaluators.0: No module named 'no_such_module'",
        ),
        (
            UPSTREAM + "evaluation: {evaluators: [{import: 'json:dumps', kwargs: {obj: 1}}]}\n",
            "returned str, not an Evaluator",
        ),
        (
            UPSTREAM + "evaluation: {drain_seconds: 20}\nshutdown_seconds: 10\n",
            "evaluation.drain_seconds must be under drain_seconds",
        ),
        (UPSTREAM + "queue: kafka\n", "queue: Input should be 'memory', 'sqlite' or 'redis'"),
        (UPSTREAM + "queue: redis\n", "queue: redis needs a `redis:` section"),
        (UPSTREAM + "queue: sqlite\nsqlite: {}\n", "sqlite.path: Field required"),
        (
            UPSTREAM + "queue: redis\nredis: {claim_seconds: 0}\n",
            "redis.claim_seconds: Input should be greater than 0",  # as spelt,
        ),
        (UPSTREAM + "receivers: {http: null, grpc: null}\n", "at least one of http and grpc"),
    ],
)
def test_a_bad_file_is_one_error_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "tracefact.yaml"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as error:  # ConfigError, or the registry's
        load(path).evaluation.build_evaluators()
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("receivers: [unclosed", "not valid YAML"),
        (
            "upstreams:\n  - endpoint: ${NO_SUCH_VARIABLE_HERE}\n",
            "NO_SUCH_VARIABLE_HERE is not set",
        ),
        (UPSTREAM + "evaluation: {evaluators: [nosuch]}\n", "evaluation.evaluators.0: unknown"),
    ],
)
def test_the_command_prints_one_line_and_exits_2(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "tracefact.yaml"
    path.write_text(text)
    result = run(path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines


def test_a_file_that_is_not_text_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "tracefact.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    result = run(path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"tracefact collector: {path}: not a YAML file (not UTF-8 text)"
    ]


def test_a_missing_file_is_exit_2(tmp_path: Path) -> None:
    result = run(tmp_path / "absent.yaml")
    assert result.returncode == 2
    assert "absent.yaml" in result.stderr


def test_environment_variables_fill_the_file(tmp_path: Path) -> None:
    with otlp_receiver() as upstream:
        config: dict[str, Any] = {
            "receivers": {"http": {"host": "127.0.0.1", "port": "${TEST_PORT:-0}"}, "grpc": None},
            "upstreams": [
                {"endpoint": "${TEST_UPSTREAM}", "headers": {"x-tenant": "${TEST_TENANT}"}}
            ],
            "evaluation": {"enabled": False},
            "metrics": {"host": "127.0.0.1", "port": 0},
        }
        env = {"TEST_UPSTREAM": upstream.endpoint, "TEST_TENANT": "acme"}
        os.environ.update(env)
        try:
            with running_collector(tmp_path / "c.yaml", config) as collector:
                exporter = OTLPSpanExporter(endpoint=f"{collector.http}/v1/traces")
                spans = fixture_spans("openinference-grounded-plain", 0x77)
                assert exporter.export(spans) == SpanExportResult.SUCCESS
                assert upstream.wait_for(1)
                metrics = httpx.get(f"http://127.0.0.1:{collector.ports['metrics']}/metrics")
                assert "tracefact_collector_spans_forwarded" in metrics.text
        finally:
            for key in env:
                del os.environ[key]
        assert "grpc" not in collector.ports
        assert upstream.headers[0]["x-tenant"] == "acme"
        [(_, span)] = upstream.spans()
        assert semconv.EVAL_STATUS not in attributes(span)  # evaluation off: a pure forwarder


def test_the_default_local_evaluator_labels_grounded_and_invented_answers(
    tmp_path: Path,
) -> None:
    """No `evaluators` key: the embedded local model, offline."""
    with otlp_receiver() as upstream:
        config = {
            "receivers": {"http": {"host": "127.0.0.1", "port": 0}, "grpc": None},
            "upstreams": [{"endpoint": upstream.endpoint}],
            "evaluation": {"window_seconds": 0.2, "drain_seconds": 5},
        }
        with running_collector(tmp_path / "c.yaml", config) as collector:
            exporter = OTLPSpanExporter(endpoint=f"{collector.http}/v1/traces")
            for trace_id, name in (
                (0x10CA1, "openinference-grounded-plain"),
                (0x10CA2, "openinference-invented-plain"),
            ):
                spans = fixture_spans(name, trace_id) + retriever_span(trace_id)
                assert exporter.export(spans) == SpanExportResult.SUCCESS
            assert upstream.wait_for(4, 60)
    labels = {
        int.from_bytes(s.trace_id, "big"): attributes(s).get("tracefact.eval.hallucination.label")
        for _, s in upstream.spans()
        if s.name == "ChatCompletion"
    }
    assert labels == {0x10CA1: "factual", 0x10CA2: "hallucinated"}


def test_sampler_keys_build_the_sdks_samplers() -> None:
    """Rules before ratio, then rate limit and budget: `sampling.py`'s own samplers."""
    from tracefact.config import SamplerOptions
    from tracefact.sampling import SpanInfo

    sampler = SamplerOptions.model_validate(
        {
            "ratio": 0.0,
            "rules": [{"match": "checkout *"}, {"match": {"tier": "gold"}, "ratio": 1.0}],
            "rate_limit": {"per_second": 1, "burst": 2},
            "budget": {"usd_per_hour": 1.0, "expected_cost_usd": 0.4},
        }
    ).build()
    assert "RateLimit" in repr(sampler) and "Budget" in repr(sampler)
    assert not sampler.decide(SpanInfo(1, "search", {})).sampled
    gold = sampler.decide(SpanInfo(2, "chat", {"tier": "gold"}))
    assert gold.sampled and gold.rate == 1.0
    assert sampler.decide(SpanInfo(3, "checkout cart", {})).sampled
    assert not sampler.decide(SpanInfo(4, "checkout cart", {})).sampled  # burst of 2 spent
