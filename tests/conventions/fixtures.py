"""The recorded OTLP/JSON spans of real instrumentors and agent frameworks.

Recorded by scripts/record_instrumentor_fixtures.py: instrumentors into fixtures/otlp
(`make fixtures`), agent frameworks into fixtures/otlp-agents (`make agent-fixtures`).
"""

from __future__ import annotations

import json
from pathlib import Path

from tracefact.conventions.otlp import OtlpSpan, spans_from_otlp_json

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "otlp"
AGENT_FIXTURES = FIXTURES.parent / "otlp-agents"
INSTRUMENTORS = ("openinference", "openai_v2", "openllmetry", "openllmetry_legacy", "langchain")
AGENT_FRAMEWORKS = ("langgraph", "openai_agents", "pydantic_ai")


def load(name: str, directory: Path = FIXTURES) -> list[OtlpSpan]:
    return spans_from_otlp_json(json.loads((directory / f"{name}.json").read_text()))


def fixture_names(directory: Path = FIXTURES) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.json"))
