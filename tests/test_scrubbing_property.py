"""Property: secret-shaped names and values never appear in anything exported or logged."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracefact
from tests.conftest import reset_global_tracer_provider
from tracefact.evaluators.lexical import LexicalOverlap

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_UPPER_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _chars(alphabet: str, low: int, high: int) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=low, max_size=high)


# Values shaped like real credentials.
TOKENS = st.one_of(
    _chars(_ALNUM, 20, 40).map(lambda s: f"sk-{s}"),
    _chars(_ALNUM, 20, 40).map(lambda s: f"sk-proj-{s}"),
    _chars(_ALNUM, 36, 40).map(lambda s: f"ghp_{s}"),
    _chars(_UPPER_DIGITS, 16, 16).map(lambda s: f"AKIA{s}"),
    st.tuples(_chars(_ALNUM, 10, 30), _chars(_ALNUM, 5, 30), _chars(_ALNUM, 0, 30)).map(
        lambda p: f"eyJ{p[0]}.eyJ{p[1]}.{p[2]}"
    ),
)
# With a digit: six letters can be a word tracefact writes itself ("halluc" in "hallucinated").
DSN_PASSWORDS = _chars(_ALNUM, 6, 20).filter(lambda p: not p.isalpha())

# Names built like real parameters: a secret word, in any casing style.
_CORES = [
    ["password"],
    ["passwd"],
    ["passphrase"],
    ["pwd"],
    ["secret"],
    ["secret", "access", "key"],
    ["api", "key"],
    ["apikey"],
    ["private", "key"],
    ["session", "id"],
    ["session"],
    ["cookie"],
    ["cookies"],
    ["csrf", "token"],
    ["xsrf"],
    ["jwt"],
    ["ssn"],
    ["credit", "card"],
    ["credentials"],
    ["authorization"],
    ["auth"],
    ["signature"],
    ["bearer"],
    ["token"],
    ["access", "token"],
]
_PREFIXES = [[], ["aws"], ["openai"], ["github"], ["my"], ["x"], ["client"]]


def _style(words: list[str], style: str) -> str:
    if style == "snake":
        return "_".join(words)
    if style == "kebab":
        return "-".join(words)
    if style == "upper":
        return "_".join(words).upper()
    return words[0] + "".join(w.capitalize() for w in words[1:])


SECRET_NAMES = st.builds(
    lambda prefix, core, style: _style([*prefix, *core], style),
    st.sampled_from(_PREFIXES),
    st.sampled_from(_CORES),
    st.sampled_from(["snake", "kebab", "camel", "upper"]),
)
SECRET_VALUES = _chars(_ALNUM, 10, 30).map(lambda s: f"V{s}")


class LogLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(logging.Formatter().format(record))


@pytest.fixture(scope="module")
def logs() -> Iterator[LogLines]:
    handler = LogLines()
    logger = logging.getLogger("tracefact")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)
    tracefact.shutdown()
    reset_global_tracer_provider()


def _exported_texts(span: ReadableSpan) -> list[str]:
    texts = [str(span.status.description)]
    for attributes in [span.attributes, *(event.attributes for event in span.events)]:
        texts.extend(str(value) for value in (attributes or {}).values())
    return texts


class ProviderFailure(Exception):
    pass


# Where spans go besides tracefact's own exporter: nowhere (tracefact owns every processor,
# and content is finished on its threads), a processor of a provider the app set up before
# configure(), or one the app added to tracefact's provider after it.
PROVIDERS = ("owned", "app_provider", "added_after")


@settings(max_examples=60, deadline=None)
@given(
    provider=st.sampled_from(PROVIDERS),
    capture=st.booleans(),
    fail=st.booleans(),
    names=st.lists(SECRET_NAMES, min_size=1, max_size=4, unique=True),
    values=st.lists(SECRET_VALUES, min_size=4, max_size=4),
    token=TOKENS,
    password=DSN_PASSWORDS,
)
def test_secrets_never_leave(
    logs: LogLines,
    provider: str,
    capture: bool,
    fail: bool,
    names: list[str],
    values: list[str],
    token: str,
    password: str,
) -> None:
    reset_global_tracer_provider()
    exporter = InMemorySpanExporter()
    app_exporter = InMemorySpanExporter()
    if provider == "app_provider":
        app_provider = TracerProvider()
        app_provider.add_span_processor(SimpleSpanProcessor(app_exporter))
        trace.set_tracer_provider(app_provider)
    installed = tracefact.configure(
        exporter=exporter, capture_content=capture, evaluators=[LexicalOverlap()]
    )
    if provider == "added_after":
        installed.add_span_processor(SimpleSpanProcessor(app_exporter))
    logs.lines.clear()
    settings_ = dict(zip(names, values, strict=False))
    dsn = f"postgresql://app:{password}@db.internal:5432/main"

    @tracefact.llm(name="answer")
    def answer(question: str, contexts: list[str], options: dict[str, Any]) -> str:
        if fail:
            raise ProviderFailure(f"rejected key {token} for {question!r} via {dsn}")
        return f"The key is {token}; connect with {dsn}."

    @tracefact.chain(name="pipeline")
    def pipeline(request: dict[str, Any], **kwargs: Any) -> str:
        return answer(f"why does {token} fail?", [f"{dsn} and {token}"], {"nested": settings_})

    try:
        pipeline({"headers": settings_, "items": [settings_]}, **settings_)
    except ProviderFailure:
        assert fail
    logging.getLogger("tracefact").warning("provider said %s at %s", token, dsn)
    assert tracefact.force_flush(10_000)
    secrets = [token, password, *values]
    exported = [*exporter.get_finished_spans(), *app_exporter.get_finished_spans()]
    assert app_exporter.get_finished_spans() or provider == "owned"
    assert not [s for s in exported if "tracefact.content.pending" in (s.attributes or {})]
    texts = [text for span in exported for text in _exported_texts(span)]
    texts += logs.lines
    leaks = [(secret, text) for secret in secrets for text in texts if secret in text]
    assert not leaks
