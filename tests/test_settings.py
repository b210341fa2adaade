"""The one table of settings: every setting reachable from each way to give it, checked once.

`configure()`'s flat keyword, its group object and `TRACEFACT_*` read the same
declarations (`tracefact.config`), as does the collector's YAML.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import tracefact
from tests.conftest import Spans
from tests.pipeline.helpers import ScriptedEvaluator
from tracefact.collector.config import parse
from tracefact.config import (
    GROUPS,
    SETTINGS,
    EvaluationOptions,
    MonitorOptions,
    Resolved,
    Settings,
    resolve,
)
from tracefact.errors import ConfigurationError

SRC = Path(__file__).resolve().parents[1] / "src" / "tracefact"


def leaf_paths(model: type[BaseModel], prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
    """Every field that holds a value (not a group), by its path."""
    paths = set()
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            paths |= leaf_paths(kind, (*prefix, name))
        else:
            paths.add((*prefix, name))
    return paths


NOT_FLAT = {
    ("evaluation", "sampler", "rules"),
    ("evaluation", "sampler", "rate_limit"),
    ("evaluation", "sampler", "budget"),
}
"""Structured sampler settings: `configure(sampler=...)` or `evaluation=`, and the YAML."""


def test_every_setting_of_a_group_has_a_flat_name_for_keyword_and_environment() -> None:
    declared = {path for name, group in GROUPS.items() for path in leaf_paths(group, (name,))}
    named = {s.path for s in SETTINGS.values() if s.path is not None}
    assert declared - NOT_FLAT == named
    keywords = set(tracefact.configure.__kwdefaults__ or {}) - set(GROUPS)
    assert keywords == set(SETTINGS)


def test_a_flat_keyword_wins_over_its_group_which_wins_over_the_environment() -> None:
    environ = {
        "TRACEFACT_QUEUE_SIZE": "9",
        "TRACEFACT_CONCURRENCY": "7",
        "TRACEFACT_ATTACH": "span",
    }
    group = EvaluationOptions(queue_size=5, concurrency=3)
    resolved = resolve({"queue_size": 4}, {"evaluation": group}, environ)
    evaluation = resolved.evaluation
    assert (evaluation.queue_size, evaluation.concurrency, evaluation.attach) == (4, 3, "span")


@pytest.mark.parametrize(
    ("variable", "raw", "path", "value"),
    [
        ("TRACEFACT_DRAIN_SECONDS", "0.5", ("evaluation", "drain_seconds"), 0.5),
        ("TRACEFACT_DOCUMENTS_MAX_DOCUMENTS", "3", ("evaluation", "documents", "max_documents"), 3),
        ("TRACEFACT_SAMPLE_RATE", "0.25", ("evaluation", "sampler", "ratio"), 0.25),
        ("TRACEFACT_MONITOR_GROUP_BY", "model, route", ("monitor", "group_by"), ("model", "route")),
        ("TRACEFACT_HEADERS", '{"x-team": "a"}', ("export", "headers"), {"x-team": "a"}),
        (
            "TRACEFACT_EVALUATORS",
            "lexical,local",
            ("evaluation", "evaluators"),
            ["lexical", "local"],
        ),
    ],
)
def test_variables_reach_every_group(
    variable: str, raw: str, path: tuple[str, ...], value: Any
) -> None:
    node: Any = resolve({}, {}, {variable: raw})
    for part in path:
        node = getattr(node, part)
    assert node == value


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"TRACEFACT_DRAIN_SECONDS": "-1"}, "TRACEFACT_DRAIN_SECONDS='-1' (drain_seconds)"),
        ({"TRACEFACT_HEADERS": "{not json"}, "TRACEFACT_HEADERS"),
        ({"TRACEFACT_DOCUMENTS_MAX_BYTES": "0"}, "documents_max_bytes"),
    ],
)
def test_a_wrong_variable_is_named(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve({}, {}, environ)


def test_settings_keeps_its_former_name_and_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRACEFACT_QUEUE_SIZE", "7")
    settings = Settings(max_retries=0)
    assert isinstance(settings, Resolved)
    assert (settings.evaluation.queue_size, settings.evaluation.max_retries) == (7, 0)


def test_the_collector_reads_the_same_groups() -> None:
    config = parse(
        {
            "upstreams": [{"endpoint": "http://127.0.0.1:9"}],
            "evaluation": {
                "queue_size": 3,
                "documents": {"max_documents": 2},
                "monitor": {"group_by": ["route"]},
                "sampler": {"ratio": 0.5},
            },
            "shutdown_seconds": 20,  # the former name of drain_seconds
        },
        environ={},
    )
    assert isinstance(config.evaluation, EvaluationOptions)
    assert config.evaluation.monitor == MonitorOptions(group_by=("route",))
    assert config.evaluation.pipeline_options().queue_size == 3
    assert config.evaluation.documents.max_documents == 2
    assert config.drain_seconds == 20 == config.shutdown_seconds


def test_an_evaluation_group_configures_the_sdk(spans: Spans) -> None:
    """queue_size 1 given as a group: the second span while the first hangs is dropped."""
    evaluator = ScriptedEvaluator()
    spans.reconfigure(
        evaluators=[evaluator], evaluation=EvaluationOptions(queue_size=1, drain_seconds=0.1)
    )
    for output in ("hang", "ok"):
        with tracefact.span("answer", kind="llm") as span:
            span.record(input=output, contexts=["ctx"], output=output)
    tracefact.shutdown()  # drains for 0.1 s: the hanging one leaves as `shutdown`
    statuses = {
        s.attributes["input.value"]: s.attributes["tracefact.eval.status"]
        for s in spans.exporter.get_finished_spans()
    }
    assert statuses == {"hang": "shutdown", "ok": "dropped"}


@pytest.mark.parametrize(
    ("module", "allowed"),
    [
        ("errors.py", set()),
        ("_clock.py", set()),
        ("_retry.py", {"tracefact.errors"}),
        ("_imports.py", {"tracefact.errors"}),
    ],
)
def test_leaf_modules_import_nothing_above_them(module: str, allowed: set[str]) -> None:
    tree = ast.parse((SRC / module).read_text())
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tracefact")
    }
    imported |= {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.startswith("tracefact")
    }
    assert imported <= allowed
