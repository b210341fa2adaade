"""Fixtures for evaluator tests: a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.openai_server import FakeOpenAI, fake_openai


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAI]:
    with fake_openai() as server:
        yield server
