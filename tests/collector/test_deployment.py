"""collector/: the example configuration, and the command line the Dockerfile and compose run.

Neither Docker nor the OpenTelemetry Collector binary runs here. These tests read the
files themselves (tests/collector/deployment.py), so what they start cannot drift from
what a container would start.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import shlex
from typing import Any

import httpx
import pytest
import yaml
from pydantic import BaseModel

from tests.collector.deployment import (
    DEPLOY,
    ROOT,
    compose_collector,
    compose_service,
    container_command,
    dockerfile_stages,
    instruction,
)
from tests.fakes.otlp import otlp_receiver
from tracefact import semconv
from tracefact.collector.config import CollectorConfig, load

EXAMPLE = DEPLOY / "tracefact.yaml"
FIXTURE = ROOT / "tests" / "fixtures" / "otlp" / "langchain-retriever-plain.json"


def test_the_example_config_loads_with_its_variables_expanded() -> None:
    environ = {
        "TRACEFACT_UPSTREAM": "http://backend.example:4318",
        "TRACEFACT_HOST": "127.0.0.1",
        "TRACEFACT_HTTP_PORT": "14318",
    }
    config = load(EXAMPLE, environ)
    assert config.upstreams[0].endpoint == "http://backend.example:4318"
    assert config.receivers.http is not None and config.receivers.grpc is not None
    assert (config.receivers.http.host, config.receivers.http.port) == ("127.0.0.1", 14318)
    assert (config.receivers.grpc.host, config.receivers.grpc.port) == ("127.0.0.1", 4317)


def test_the_example_config_states_the_defaults() -> None:
    """Its values are the model's defaults, so what it says about them is true."""
    config = load(EXAMPLE, {})
    defaults = CollectorConfig(upstreams=config.upstreams)
    assert config.model_dump() == defaults.model_dump()


def field_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every key of the configuration, nested models included, as dotted paths."""
    paths = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        paths.append(prefix + key)
        for inner in _models_in(field.annotation):
            paths.extend(field_paths(inner, f"{prefix}{key}."))
    return paths


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) for m in _models_in(arg)]


def test_the_example_config_names_every_key() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    missing = [
        path
        for path in field_paths(CollectorConfig)
        if not re.search(rf"(^|[\s{{,]){re.escape(path.rsplit('.', 1)[-1])}:", text, re.MULTILINE)
    ]
    assert not missing, f"collector/tracefact.yaml does not mention {missing}"


PHOENIX = DEPLOY / "phoenix.yaml"


def test_compose_sets_only_variables_the_config_reads() -> None:
    referenced = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", PHOENIX.read_text()))
    environment = compose_service("tracefact")["environment"]
    assert set(environment) <= referenced, set(environment) - referenced
    assert environment["TRACEFACT_UPSTREAM"] == "http://phoenix:6006"


def test_the_image_runs_the_example_config_and_compose_the_phoenix_one() -> None:
    assert instruction("collector", "CMD") == [
        "collector",
        "--config",
        "/etc/tracefact/tracefact.yaml",
    ]
    assert container_command("tracefact") == [
        "tracefact",
        "collector",
        "--config",
        "/etc/tracefact/phoenix.yaml",
    ]
    copies = [a.split() for kw, a in dockerfile_stages()["collector"] if kw == "COPY"]
    assert ["collector/tracefact.yaml", "/etc/tracefact/tracefact.yaml"] in copies
    assert ["collector/phoenix.yaml", "/etc/tracefact/phoenix.yaml"] in copies


def test_files_bind_loopback_and_containers_every_address() -> None:
    """A collector run from a clone listens to this machine only; an image to the network."""
    for path in (EXAMPLE, PHOENIX, DEPLOY / "tracefact.scale.yaml"):
        config = load(path, {"TRACEFACT_REDIS_URL": "redis://127.0.0.1:6379/0"})
        assert config.receivers.http is not None
        assert config.receivers.http.host == "127.0.0.1", path
        assert config.metrics.host == "127.0.0.1", path
    assert ("ENV", "TRACEFACT_HOST=0.0.0.0") in dockerfile_stages()["collector"]
    assert compose_service("tracefact")["environment"]["TRACEFACT_HOST"] == "0.0.0.0"


def test_the_phoenix_config_sends_annotations_to_its_upstream() -> None:
    config = load(PHOENIX, compose_service("tracefact")["environment"])
    sink = config.evaluation.sinks[0]
    assert sink.type == "phoenix" and sink.endpoint == "http://phoenix:6006"
    assert config.upstreams[0].endpoint == "http://phoenix:6006"
    beside_phoenix = load(PHOENIX, {}).receivers.grpc  # a local Phoenix holds 4317
    assert beside_phoenix is not None and beside_phoenix.port != 4317


def test_the_build_context_lets_through_exactly_what_the_stages_copy() -> None:
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    allowed = {line[1:] for line in ignore if line.startswith("!")}
    copied = {
        source
        for stage in dockerfile_stages().values()
        for keyword, arguments in stage
        if keyword == "COPY"
        for source in arguments.split()[:-1]
    }
    assert "**" in ignore
    assert allowed == copied


def test_the_demo_image_pins_the_instrumentors_the_tests_use() -> None:
    required = importlib.metadata.requires("tracefact") or []
    pins = [r.split(";")[0].strip() for r in required if "extra == 'instrumentors'" in r]
    run = [arg for kw, a in dockerfile_stages()["demo"] if kw == "RUN" for arg in shlex.split(a)]
    for package in ("openai", "openinference-instrumentation-openai"):
        pin = next(p for p in pins if p.startswith(f"{package}=="))
        assert pin in run, (pin, run)


def test_compose_runs_the_phoenix_release_of_the_e2e_tests() -> None:
    pinned = (ROOT / "e2e" / "requirements-phoenix.txt").read_text()
    version = re.search(r"^arize-phoenix==(\S+)", pinned, re.MULTILINE)
    assert version is not None
    assert compose_service("phoenix")["image"] == f"arizephoenix/phoenix:{version[1]}"


def test_the_otelcol_config_wires_every_component_it_names() -> None:
    config = yaml.safe_load((DEPLOY / "otelcol.yaml").read_text())
    pipelines = config["service"]["pipelines"]
    connectors = set(config["connectors"])
    declared = {
        kind: set(config.get(kind) or {})
        for kind in ("receivers", "processors", "exporters", "connectors")
    }
    for name, pipeline in pipelines.items():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                known = declared[kind] if kind == "processors" else declared[kind] | connectors
                assert component in known, f"{name} uses undeclared {kind[:-1]} {component}"
    routing = config["connectors"]["routing"]
    routed = {p for route in routing["table"] for p in route["pipelines"]}
    routed |= set(routing["default_pipelines"])
    assert routed <= set(pipelines)
    for target in routed:  # each routed pipeline takes its spans from the connector
        assert pipelines[target]["receivers"] == ["routing"], target
    assert config["exporters"]["loadbalancing"]["routing_key"] == "traceID"


def test_the_otelcol_profile_of_compose_matches_otelcol_yaml() -> None:
    """The replicas are the load balancer's backends and send back to its second receiver."""
    config = yaml.safe_load((DEPLOY / "otelcol.yaml").read_text())
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    assert "./otelcol.yaml:/etc/otelcol-contrib/config.yaml:ro" in services["otelcol"]["volumes"]
    replicas = sorted(
        name
        for name, service in services.items()
        if "otelcol" in service.get("profiles", []) and "build" in service
    )
    assert len(replicas) >= 2
    grpc = CollectorConfig(upstreams=[{"endpoint": "x"}]).receivers.grpc
    assert grpc is not None
    hostnames = config["exporters"]["loadbalancing"]["resolver"]["static"]["hostnames"]
    assert sorted(hostnames) == [f"{name}:{grpc.port}" for name in replicas]
    evaluated = config["receivers"]["otlp/evaluated"]["protocols"]["http"]["endpoint"]
    back = f"http://otelcol:{evaluated.rsplit(':', 1)[1]}"
    for name in replicas:
        assert services[name]["command"] == services["tracefact"]["command"], name
        assert services[name]["environment"]["TRACEFACT_UPSTREAM"] == back, name
    assert config["service"]["pipelines"]["traces/evaluated"]["receivers"] == ["otlp/evaluated"]
    backend = config["exporters"]["otlphttp/backend"]["endpoint"]
    assert backend == "http://phoenix:6006" and "6006:6006" in services["phoenix"]["ports"]


@pytest.mark.slow
def test_the_container_command_forwards_and_evaluates_then_drains() -> None:
    body = FIXTURE.read_bytes()
    sent = sum(
        len(scope["spans"])
        for resource in json.loads(body)["resourceSpans"]
        for scope in resource["scopeSpans"]
    )
    with otlp_receiver() as upstream, compose_collector(upstream.endpoint) as collector:
        assert httpx.get(f"{collector.http}/healthz").status_code == 200
        reply = httpx.post(
            f"{collector.http}/v1/traces",
            content=body,
            headers={"Content-Type": "application/json"},
        )
        assert reply.status_code == 200, reply.text
        upstream.wait_for(sent, timeout=60)
        metrics = httpx.get(f"{collector.http}/metrics").text
    assert collector.process.returncode == 0, "".join(collector.lines)[-3000:]
    received = [span for _, span in upstream.spans()]
    assert len(received) == sent
    spans = {span.name: span for span in received}
    llm = {a.key: a.value.string_value for a in spans["ChatOpenAI"].attributes}
    assert llm[semconv.EVAL_STATUS] == semconv.STATUS_OK
    assert llm[semconv.eval_attribute("hallucination", "label")] == "factual"
    assert llm[semconv.CONTEXTS_SOURCE] == "retrieval"
    retriever = {a.key for a in spans["FakeRetriever"].attributes}
    assert not any(key.startswith("tracefact.") for key in retriever)
    assert "tracefact" in metrics
