"""Live tests of real agent frameworks (`make test-agents`, the `agents` extra's venv).

Without the frameworks (plain `make test`) they are skipped; the recorded fixtures of their
spans (tests/fixtures/otlp-agents) test the reader everywhere.
"""

from __future__ import annotations

import pytest

for package in (
    "pydantic_ai",
    "agents",
    "langgraph",
    "openinference.instrumentation.openai_agents",
):
    pytest.importorskip(package, reason="needs the agents extra: make test-agents")
