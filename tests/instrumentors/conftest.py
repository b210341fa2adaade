"""Live tests against the real instrumentor packages (`make test-instrumentors`).

They need the `instrumentors` extra; without it (plain `make test`) they are skipped.
Instrumentors of one library do not fully undo each other (an uninstrumented wrapper can
stay in place), so `make test-instrumentors` runs each one's tests in its own process:
TRACEFACT_INSTRUMENTOR=<name> keeps only the tests of that instrumentor (their `name`
parameter). The GenAI instrumentor's documented opt-in puts messages on the span; it is read once
per process, so it is set before anything is instrumented.
"""

from __future__ import annotations

import os

import pytest

from tests.fakes.instrumentors import OPENAI_V2_ENV

for package in ("openai", "openinference.instrumentation.openai", "langchain_openai"):
    pytest.importorskip(package, reason="needs the instrumentors extra: make test-instrumentors")

os.environ.update(OPENAI_V2_ENV)
os.environ["TRACELOOP_METRICS_ENABLED"] = "false"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    only = os.environ.get("TRACEFACT_INSTRUMENTOR")
    if not only:
        return
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        name = callspec.params.get("name") if callspec is not None else None
        (keep if name == only else drop).append(item)
    config.hook.pytest_deselected(items=drop)
    items[:] = keep
