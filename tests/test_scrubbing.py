"""Secrets never leave in anything tracefact writes; ordinary names and texts stay."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

import tracefact
from tests.conftest import Spans
from tracefact import semconv
from tracefact.evaluators.base import EvalCase, EvalResult, EvaluatorDescription, ProviderError
from tracefact.scrubbing import Scrubber, ScrubbingOptions

SECRET = "s3cr3t-Value-9f8e7d"

# The names a round of hostile-input tests found exported, and names that must stay.
SECRET_NAMES = [
    "aws_secret_access_key",
    "secretKey",
    "secret_key",
    "openaiApiKey",
    "session_id",
    "passphrase",
    "pwd",
    "bearer",
    "githubToken",
    "signature",
    "cookies",
    "password",
    "api_key",
    "x-api-key",
    "Authorization",
    "access_token",
    "refresh_token",
    "private_key",
    "client_secret",
    "credentials",
    "csrf_token",
    "XSRF-TOKEN",
    "jwt",
    "ssn",
    "credit_card_number",
    "database_dsn",
]
ORDINARY_NAMES = [
    "max_tokens",
    "author",
    "authors",
    "tokens_used",
    "input_tokens",
    "token_count",
    "question",
    "temperature",
    "keyword",
    "monkey",
]

SECRET_VALUES = {
    "openai": "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2",
    "anthropic": "sk-ant-api03-" + "abcdEFGH1234ijklMNOP5678",
    "github": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "aws": "AKIA" + "IOSFODNN7EXAMPLE",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
    "stripe": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
}


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_names_are_caught(name: str) -> None:
    assert Scrubber().is_secret_name(name)


@pytest.mark.parametrize("name", ORDINARY_NAMES)
def test_ordinary_names_stay(name: str) -> None:
    assert not Scrubber().is_secret_name(name)


def test_secret_keys_inside_recorded_values_are_replaced_and_listed(spans: Spans) -> None:
    @tracefact.chain(name="call")
    def call(payload: dict[str, Any], max_tokens: int) -> str:
        return "ok"

    payload = {name: SECRET for name in SECRET_NAMES}
    payload["author"] = "Ada"
    call({"request": payload, "tokens_used": 3}, max_tokens=5)
    span = spans.one("call")
    recorded = str(span.attributes[semconv.INPUT_VALUE])
    assert SECRET not in recorded
    decoded = json.loads(recorded)
    assert decoded["payload"]["request"]["author"] == "Ada"
    assert decoded["payload"]["tokens_used"] == 3 and decoded["max_tokens"] == 5
    scrubbed = span.attributes[semconv.SCRUBBED]
    assert "input.value.payload.request.aws_secret_access_key" in scrubbed
    assert len(scrubbed) == len(SECRET_NAMES)


def test_secret_named_arguments_are_not_recorded(spans: Spans) -> None:
    @tracefact.chain(name="call")
    def call(body: str, openaiApiKey: str, session_id: str, pwd: str) -> str:
        return "ok"

    call("hello", SECRET, SECRET, pwd=SECRET)
    assert spans.one("call").attributes[semconv.INPUT_VALUE] == "hello"


@pytest.mark.parametrize("kind", sorted(SECRET_VALUES))
def test_secret_shaped_values_are_replaced_in_text(spans: Spans, kind: str) -> None:
    token = SECRET_VALUES[kind]

    @tracefact.llm(name="answer")
    def answer(question: str, contexts: list[str]) -> str:
        return f"Use the key {token} to log in."

    answer(f"my key is {token}, why?", [f"doc mentions {token}"])
    span = spans.one("answer")
    exported = json.dumps(
        {k: list(v) if isinstance(v, tuple) else v for k, v in span.attributes.items()}
    )
    assert token not in exported
    assert span.attributes[semconv.OUTPUT_VALUE] == "Use the key [SCRUBBED] to log in."
    assert set(span.attributes[semconv.SCRUBBED]) == {
        semconv.INPUT_VALUE,
        semconv.OUTPUT_VALUE,
        f"{semconv.CONTEXTS}.0",
    }


def test_only_the_secret_part_of_a_value_is_replaced(spans: Spans) -> None:
    @tracefact.chain(name="echo")
    def echo(text: str) -> str:
        return text

    echo("db at postgres://app:hunter2pass@db.internal:5432/main; header Bearer abcdef123456xyz")
    assert spans.one("echo").attributes[semconv.OUTPUT_VALUE] == (
        "db at postgres://app:[SCRUBBED]@db.internal:5432/main; header Bearer [SCRUBBED]"
    )


def test_a_urls_secret_query_parameters_are_replaced_and_the_others_stay(spans: Spans) -> None:
    @tracefact.chain(name="echo")
    def echo(text: str) -> str:
        return text

    echo(
        "GET https://api.example.com/v1/x?page=2&token=t0k3nValue9&sig=AbC123xyz&key=k3yValue"
        "&session=s3ssion&q=sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2#top (see ?sort=asc&x=1)"
    )
    assert spans.one("echo").attributes[semconv.OUTPUT_VALUE] == (
        "GET https://api.example.com/v1/x?page=2&token=[SCRUBBED]&sig=[SCRUBBED]&key=[SCRUBBED]"
        "&session=[SCRUBBED]&q=[SCRUBBED]#top (see ?sort=asc&x=1)"
    )


def test_prose_about_passwords_stays(spans: Spans) -> None:
    @tracefact.llm(name="answer")
    def answer(question: str) -> str:
        return "Open Settings, then Security, and choose Reset password. It took 3 minutes."

    answer("How do I reset my password and my session?")
    attributes = spans.one("answer").attributes
    assert attributes[semconv.INPUT_VALUE] == "How do I reset my password and my session?"
    assert semconv.SCRUBBED not in attributes


def test_allow_keys_and_extra_patterns(spans: Spans) -> None:
    spans.reconfigure(
        scrubbing=ScrubbingOptions(
            extra_patterns=[r"acct-\d{6}", "tenant"], allow_keys=["session_id"]
        )
    )

    @tracefact.chain(name="call")
    def call(payload: dict[str, str]) -> str:
        return "for acct-123456 only"

    call({"session_id": "abc", "tenant_name": "acme", "password": SECRET})
    span = spans.one("call")
    recorded = str(span.attributes[semconv.INPUT_VALUE])
    assert "acme" not in recorded and SECRET not in recorded
    assert json.loads(recorded)["session_id"] == "abc"
    assert span.attributes[semconv.OUTPUT_VALUE] == "for [SCRUBBED] only"


def test_scrubbing_false_turns_it_off(spans: Spans) -> None:
    spans.reconfigure(scrubbing=False)

    @tracefact.chain(name="echo")
    def echo(payload: dict[str, str]) -> str:
        return SECRET_VALUES["openai"]

    echo({"password": "hunter2"})
    span = spans.one("echo")
    assert span.attributes[semconv.OUTPUT_VALUE] == SECRET_VALUES["openai"]
    assert "hunter2" in str(span.attributes[semconv.INPUT_VALUE])


class ProviderDown(Exception):
    pass


def test_exception_text_is_scrubbed_and_redacted(spans: Spans) -> None:
    spans.reconfigure(redact=lambda text: text.replace("Alice", "***"))
    key = SECRET_VALUES["openai"]

    @tracefact.llm(name="answer")
    def answer(question: str) -> str:
        raise ProviderDown(f"Incorrect API key {key} for prompt 'Where does Alice live?'")

    with pytest.raises(ProviderDown):
        answer("Where does Alice live?")
    span = spans.one("answer")
    (event,) = span.events
    texts = [str(v) for v in event.attributes.values()] + [str(span.status.description)]
    assert all(key not in text and "Alice" not in text for text in texts)
    assert "[SCRUBBED]" in event.attributes[semconv.EXCEPTION_MESSAGE]
    assert "ProviderDown" in event.attributes[semconv.EXCEPTION_STACKTRACE]
    assert span.status.status_code == StatusCode.ERROR
    assert semconv.EXCEPTION_MESSAGE in span.attributes[semconv.SCRUBBED]


def test_a_model_name_or_document_id_holding_a_key_is_scrubbed(spans: Spans) -> None:
    key = SECRET_VALUES["openai"]

    @tracefact.retriever(name="search")
    def search(query: str) -> list[dict[str, str]]:
        return [{"content": "Paris is the capital.", "id": f"https://x.test/d?token={key}"}]

    @tracefact.llm(name="fixed", model=key)
    def fixed(question: str) -> str:
        return "a"

    search("q")
    fixed("q")
    with tracefact.span("recorded", kind="llm") as s:
        s.record(input="q", output="a", model=key)
    for name in ("search", "fixed", "recorded"):
        assert all(key not in str(v) for v in spans.one(name).attributes.values()), name
    assert spans.one("fixed").attributes[semconv.LLM_MODEL_NAME] == "[SCRUBBED]"


def test_exception_text_is_withheld_when_capture_is_off(spans: Spans) -> None:
    spans.reconfigure(capture_content=False)

    @tracefact.llm(name="answer")
    def answer(question: str) -> str:
        raise ProviderDown("the prompt was: my private question")

    with pytest.raises(ProviderDown):
        answer("my private question")
    span = spans.one("answer")
    (event,) = span.events
    texts = [str(v) for v in event.attributes.values()] + [str(span.status.description)]
    assert all("private question" not in text for text in texts)
    assert "ProviderDown" in event.attributes[semconv.EXCEPTION_STACKTRACE]
    assert "in answer" in event.attributes[semconv.EXCEPTION_STACKTRACE]  # frames stay


def test_capture_off_marks_llm_spans(spans: Spans) -> None:
    spans.reconfigure(capture_content=False)

    @tracefact.llm(name="answer")
    def answer(question: str, contexts: list[str]) -> str:
        return "private answer"

    @tracefact.chain(name="pipeline")
    def pipeline() -> str:
        return answer("q", ["ctx"])

    pipeline()
    assert spans.one("answer").attributes[semconv.CAPTURE_CONTENT] is False
    assert spans.one("answer").attributes[semconv.EVAL_STATUS] == semconv.STATUS_SKIPPED
    assert spans.one("answer").attributes[semconv.EVAL_SKIP_REASON] == semconv.SKIP_CAPTURE_OFF
    assert semconv.CAPTURE_CONTENT not in spans.one("pipeline").attributes


async def _coroutine() -> str:
    return "late answer"


@pytest.mark.parametrize(
    ("output", "kind"), [(None, "NoneType"), (b"binary", "bytes"), ("coroutine", "coroutine")]
)
def test_non_text_outputs_are_not_judged_as_answers(
    spans: Spans, caplog: pytest.LogCaptureFixture, output: Any, kind: str
) -> None:
    @tracefact.llm(name="answer")
    def answer(question: str, contexts: list[str]) -> Any:
        return _coroutine() if output == "coroutine" else output

    result = answer("q", ["ctx"])
    if output == "coroutine":
        result.close()  # never awaited here; the caller would await it
        assert "returned a coroutine" in caplog.text
    attributes = spans.one("answer").attributes
    assert semconv.OUTPUT_VALUE not in attributes
    assert attributes[semconv.OUTPUT_NOT_TEXT] == kind
    assert attributes[semconv.EVAL_STATUS] == semconv.STATUS_SKIPPED


class QuotingEvaluator:
    """Explains by quoting a key, or fails with a provider error that quotes it."""

    name = "hallucination"

    def __init__(self, fail: bool) -> None:
        self.fail = fail

    async def evaluate(self, case: EvalCase) -> EvalResult:
        key = SECRET_VALUES["github"]
        if self.fail:
            raise ProviderError(f"401 from provider: bad token {key}", transient=False)
        return EvalResult(
            name=self.name,
            label="hallucinated",
            score=1.0,
            explanation=f"the answer invents {key}",
            unsupported=[f"claim with {key}"],
            evaluator="quoting",
        )

    def describe(self) -> EvaluatorDescription:
        return EvaluatorDescription(name=self.name, evaluator="quoting")


@pytest.mark.parametrize("fail", [False, True])
def test_evaluation_texts_and_logs_are_scrubbed(
    spans: Spans, caplog: pytest.LogCaptureFixture, fail: bool
) -> None:
    spans.reconfigure(evaluators=[QuotingEvaluator(fail)])

    @tracefact.llm(name="answer")
    def answer(question: str, contexts: list[str]) -> str:
        return "Paris"

    answer("capital?", ["Paris is the capital."])
    span = spans.one("answer")
    key = SECRET_VALUES["github"]
    values = [str(v) for v in span.attributes.values()]
    values += [str(v) for event in span.events for v in event.attributes.values()]
    assert span.attributes[semconv.EVAL_STATUS] == ("error" if fail else "ok")
    assert all(key not in value for value in values)
    assert any("[SCRUBBED]" in value for value in values)
    with caplog.at_level(logging.ERROR, logger="tracefact"):
        logging.getLogger("tracefact").error("provider said %s", key, exc_info=ValueError(key))
    assert key not in caplog.text and "[SCRUBBED]" in caplog.text


@pytest.mark.parametrize("name", ["tracefact.collector", "tracefact.collector.queue"])
def test_a_child_loggers_records_are_scrubbed_in_any_handler(spans: Spans, name: str) -> None:
    """The application's own handler on the root logger reads no secret from tracefact."""
    key = SECRET_VALUES["github"]
    output = io.StringIO()
    handler = logging.StreamHandler(output)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        logging.getLogger(name).error("upstream said %s", key, exc_info=ValueError(key))
    finally:
        root.removeHandler(handler)
    assert "upstream said [SCRUBBED]" in output.getvalue()
    assert key not in output.getvalue() and "ValueError" in output.getvalue()
