"""The recorded OTLP/JSON spans of real instrumentors (scripts/record_instrumentor_fixtures.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tracefact.conventions.otlp import OtlpSpan, spans_from_otlp_json

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "otlp"
INSTRUMENTORS = ("openinference", "openai_v2", "openllmetry", "openllmetry_legacy", "langchain")


def load(name: str) -> list[OtlpSpan]:
    return spans_from_otlp_json(json.loads((FIXTURES / f"{name}.json").read_text()))


def fixture_names() -> list[str]:
    return sorted(p.stem for p in FIXTURES.glob("*.json"))
