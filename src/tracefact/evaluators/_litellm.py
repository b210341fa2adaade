"""The one place where judges call a model: litellm, JSON replies, errors, usage and cost.

Every judge goes through `ask_json`, so temperature, JSON mode, timeouts, error
mapping, cost accounting and the suppression of our own tracing are decided once.
litellm is imported lazily: importing it costs seconds and, unless told otherwise,
downloads a price table.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from tracefact._imports import import_litellm
from tracefact._otel import suppress_instrumentation
from tracefact._retry import is_transient_status, retry_after_seconds
from tracefact.evaluators.base import (
    BadReplyError,
    CredentialsError,
    EvaluationTimeout,
    ProviderError,
    RateLimitError,
)

Reply = TypeVar("Reply", bound=BaseModel)

DEFAULT_TIMEOUT_SECONDS = 60.0
logger = logging.getLogger("tracefact")
_reported: set[str] = set()
_reported_lock = threading.Lock()

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class JudgeReply(Generic[Reply]):
    """A validated reply plus what it cost."""

    value: Reply
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None

    def usage(self) -> dict[str, int | None]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}


async def ask_json(
    model: str,
    messages: Sequence[Mapping[str, str]],
    schema: type[Reply],
    options: Mapping[str, Any],
) -> JudgeReply[Reply]:
    """One deterministic completion whose reply must validate against `schema`.

    `options` go to `litellm.acompletion` unchanged (api_base, api_key, timeout,
    mock_response, ...). litellm's own retries are off unless asked for: retrying is
    the pipeline's job, and a judge that retries inside hides rate limits from it.
    Temperature 0 is dropped for models that refuse it (reasoning models).
    """
    litellm = import_litellm()
    try:
        check_credentials(litellm, model, options)
    except CredentialsError as error:
        report_once(error)
        raise
    kwargs: dict[str, Any] = {
        "temperature": 0,
        "drop_params": True,
        "timeout": DEFAULT_TIMEOUT_SECONDS,
        "num_retries": 0,
        "max_retries": 0,
        **options,
    }
    # Suppressed so that a judge's own call never becomes a traced, evaluated LLM span;
    # quiet, since looking up a model litellm does not list (a proxy's, a self-hosted
    # one's) prints a banner, for the JSON mode, the call and its price alike.
    with suppress_instrumentation(), _quiet_banners(litellm):
        if "response_format" not in kwargs and _supports_json_mode(litellm, model):
            kwargs["response_format"] = {"type": "json_object"}
        try:
            response = await litellm.acompletion(model=model, messages=list(messages), **kwargs)
        except _provider_errors(litellm) as exc:
            mapped = _map_error(litellm, model, exc)
            if isinstance(mapped, CredentialsError):
                report_once(mapped)
            raise mapped from exc
        cost = _cost(litellm, response)
    try:
        text = _reply_text(response)
        value = parse_reply(text, schema)
    except BadReplyError as exc:
        exc.cost_usd = cost  # a reply in the wrong format is still paid for
        raise
    usage = getattr(response, "usage", None)
    return JudgeReply(
        value=value,
        text=text,
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
        cost_usd=cost,
    )


def check_credentials(litellm: Any, model: str, options: Mapping[str, Any]) -> None:
    """A `CredentialsError` naming the variables to set when `model`'s key is missing.

    Checked before the call: without a key litellm's client fails with an HTTP 500,
    which would be retried as if the provider were down.
    """
    if options.get("api_key") or "mock_response" in options:
        return
    try:
        with _quiet_banners(litellm):  # a model litellm does not list prints its banner
            found = litellm.validate_environment(model=model, api_base=options.get("api_base"))
    except Exception:  # a provider litellm cannot check: let the call decide
        return
    missing = [str(name) for name in found.get("missing_keys") or []]
    if missing:
        raise CredentialsError(
            f"no API key for {model}: set {' and '.join(missing)} (or pass api_key=...)"
        )


def report_once(error: CredentialsError) -> None:
    """Log a configuration error once per process; every span still carries it."""
    message = str(error)
    with _reported_lock:
        if message in _reported:
            return
        _reported.add(message)
    logger.error("tracefact: %s", message)


class _BannerSilencer:
    """Sets ``litellm.suppress_debug_info`` while any of our calls is in flight.

    litellm prints "Give Feedback / Get Help" and "LiteLLM.Info" to stdout on every
    failed call, and "Provider List" whenever it looks up a model it does not list; a
    judge's failure is already on the span. The user's own setting is restored when our
    last call ends.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._saved: Any = False

    @contextmanager
    def __call__(self, litellm: Any) -> Iterator[None]:
        with self._lock:
            if self._active == 0:
                self._saved = litellm.suppress_debug_info
                litellm.suppress_debug_info = True
            self._active += 1
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                if self._active == 0:
                    litellm.suppress_debug_info = self._saved


_quiet_banners = _BannerSilencer()


def parse_reply(text: str, schema: type[Reply]) -> Reply:
    """The JSON object in `text` that validates against `schema`.

    Accepts a bare object, a ```json fence, or an object inside chatty prose. No valid
    object, or several that disagree, is a `BadReplyError`: a judge that did not give
    one answer has no verdict to guess.
    """
    problems: list[str] = []
    found: list[Reply] = []
    for candidate in _json_objects(text):
        try:
            value = schema.model_validate(candidate)
        except ValidationError as exc:
            problems.append(str(exc.errors(include_url=False, include_input=False)[:3]))
            continue
        if all(value != seen for seen in found):  # a fenced object is also seen in the text
            found.append(value)
    if len(found) == 1:
        return found[0]
    if found:
        raise BadReplyError(
            f"judge reply holds {len(found)} different answers: {_preview(text)}", reply=text
        )
    detail = f"; closest: {problems[0]}" if problems else ""
    raise BadReplyError(
        f"judge reply has no valid {schema.__name__} JSON object{detail}: {_preview(text)}",
        reply=text,
    )


def _json_objects(text: str) -> Iterator[Any]:
    """JSON objects found in fences first, then anywhere in the text, in order."""
    decoder = json.JSONDecoder()
    for chunk in [*_FENCE.findall(text), text]:
        position = chunk.find("{")
        while position != -1:
            try:
                value, _ = decoder.raw_decode(chunk, position)
            except json.JSONDecodeError:
                pass
            except RecursionError:  # nested deeper than any verdict: no object here
                break
            else:
                if isinstance(value, dict):
                    yield value
            position = chunk.find("{", position + 1)


def _supports_json_mode(litellm: Any, model: str) -> bool:
    """JSON mode where litellm knows the provider accepts it; plain prompts elsewhere."""
    try:
        params = litellm.get_supported_openai_params(model=model) or []
    except Exception:  # unknown provider or model: ask without JSON mode
        return False
    return "response_format" in params


def _reply_text(response: Any) -> str:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError) as exc:
        raise BadReplyError(f"judge response has no message: {exc}") from exc
    if not isinstance(content, str) or not content.strip():
        raise BadReplyError("judge reply is empty", reply=str(content or ""))
    return content


def _cost(litellm: Any, response: Any) -> float | None:
    """Cost from litellm's price table; None for models it does not price."""
    try:
        return float(litellm.completion_cost(completion_response=response))
    except Exception:  # litellm raises various errors for unmapped models
        return None


def _provider_errors(litellm: Any) -> tuple[type[Exception], ...]:
    """Everything litellm raises for a failed call (its types do not share one base)."""
    import openai  # a dependency of litellm; most litellm errors subclass its errors

    return (openai.OpenAIError, *getattr(litellm, "LITELLM_EXCEPTION_TYPES", ()))


def _map_error(litellm: Any, model: str, exc: Exception) -> Exception:
    """Litellm's exception zoo onto tracefact's small hierarchy, keeping the status code."""
    errors = litellm.exceptions
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    message = f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "") + f": {exc}"
    if isinstance(exc, (errors.AuthenticationError, errors.PermissionDeniedError)) or (
        "missing credentials" in str(exc).lower()
    ):
        variable = _key_variable(litellm, model)
        return CredentialsError(
            f"the provider refused the credentials for {model}: check {variable}"
            f" (or pass api_key=...); {message}",
            status_code=status,
        )
    if "llm provider not provided" in str(exc).lower():
        return ProviderError(
            f"litellm does not know the provider of {model!r}: name it, e.g. openai/{model}"
            " for an OpenAI-compatible server or proxy (with api_base)",
            status_code=status,
        )
    if isinstance(exc, errors.RateLimitError):
        return RateLimitError(message, retry_after=_retry_after(exc))
    if isinstance(exc, errors.Timeout):
        return EvaluationTimeout(message)
    if isinstance(exc, errors.APIConnectionError):
        return ProviderError(message, transient=True)
    transient = status is not None and (is_transient_status(status) or status == 409)
    return ProviderError(message, status_code=status, transient=transient)


def _key_variable(litellm: Any, model: str) -> str:
    """The variable a provider's key usually lives in, e.g. OPENAI_API_KEY."""
    try:
        provider = litellm.get_llm_provider(model=model)[1]
    except Exception:  # unknown provider: name the model's prefix instead
        provider = model.partition("/")[0]
    return f"{str(provider).upper()}_API_KEY"


def _retry_after(exc: Exception) -> float | None:
    headers = getattr(exc, "litellm_response_headers", None) or getattr(
        getattr(exc, "response", None), "headers", None
    )
    return retry_after_seconds(headers)


def _preview(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "…")
