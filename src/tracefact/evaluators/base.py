"""The evaluator contract: what goes in, what comes out, and how it fails.

One score direction everywhere: higher means more hallucinated. An evaluator's own
figure (for example Vectara's consistency score) goes into ``EvalResult.raw``.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tracefact.errors import TracefactError
from tracefact.scrubbing import valid_utf8

Label = Literal["factual", "hallucinated"]
FACTUAL: Label = "factual"
HALLUCINATED: Label = "hallucinated"


class EvalCase(BaseModel):
    """One answer to judge: the question, what it must be grounded in, and the answer.

    Its texts are made valid UTF-8 as it is made (a lone surrogate becomes "?"): every
    evaluator encodes them (a tokenizer, a provider's JSON, a cache key), and one such
    character must not fail them, nor the cases judged beside it.
    """

    input: str = ""
    contexts: list[str] = Field(default_factory=list)
    output: str
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("input", "output")
    @classmethod
    def _valid_text(cls, text: str) -> str:
        return valid_utf8(text)

    @field_validator("contexts")
    @classmethod
    def _valid_texts(cls, texts: list[str]) -> list[str]:
        return [valid_utf8(text) for text in texts]


class EvalResult(BaseModel):
    """An evaluator's verdict on one case."""

    name: str
    label: Label
    score: float = Field(ge=0.0, le=1.0, description="0 = fully supported, 1 = hallucinated")
    explanation: str = ""
    unsupported: list[str] = Field(default_factory=list)
    evaluator: str = Field(description="which evaluator and version or model")
    # Finite and not negative: both go onto spans and into sinks' JSON payloads.
    latency_ms: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    cost_usd: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    annotator_kind: Literal["LLM", "CODE"] = "CODE"
    raw: dict[str, Any] = Field(default_factory=dict)


class EvaluatorDescription(BaseModel):
    """What an evaluator is: enough to tell two configurations apart, and no secret.

    Used to label results and as the identity of `Cached` entries, so everything that
    can change a verdict (model, prompt style, threshold...) belongs in it.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    """The result name, prefixing the span attributes (`tracefact.eval.<name>.*`)."""
    evaluator: str
    """The method, e.g. ``llm-judge``, ``local-factuality``."""
    source: Literal["code", "llm", "api"] = "code"
    model: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    """Options that change verdicts (threshold, style, nested evaluators...)."""
    direction: Literal["minimize"] = "minimize"
    """Always: a higher score means more hallucinated."""

    @property
    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of what every evaluator reads: an `EvalCase`."""
        return EvalCase.model_json_schema()

    def identity(self) -> str:
        """A stable text of the whole description (key order fixed), for cache keys."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, default=str)


@runtime_checkable
class Evaluator(Protocol):
    """Anything with a name that turns an `EvalCase` into an `EvalResult`, asynchronously.

    Implementations raise an `EvaluationError` subclass instead of guessing.
    """

    name: str

    async def evaluate(self, case: EvalCase) -> EvalResult: ...

    def describe(self) -> EvaluatorDescription:
        """What this evaluator is and how it is configured; also its cache identity."""
        ...


class EvaluationError(TracefactError):
    """Base of every error an evaluator raises; the pipeline records it as status `error`.

    `transient` (from `TracefactError`) says whether retrying may succeed.
    """

    cost_usd: float | None = None
    """What the failed attempt still cost (a paid judge reply in the wrong format)."""
    fallback: EvalResult | None = None
    """A result to keep if retrying never succeeds (a `Cascade`'s first verdict)."""


class InvalidCaseError(EvaluationError):
    """The case lacks what this evaluator needs (for example no contexts)."""


class BadReplyError(EvaluationError):
    """The evaluator answered, but not in the expected format. Never turned into a guess."""

    def __init__(self, message: str, reply: str = "", cost_usd: float | None = None) -> None:
        super().__init__(message)
        self.reply = reply
        self.cost_usd = cost_usd


class ProviderError(EvaluationError):
    """The model provider or API failed; `status_code` is the HTTP status when known."""

    def __init__(self, message: str, status_code: int | None = None, transient: bool = False):
        super().__init__(message)
        self.status_code = status_code
        self.transient = transient


class CredentialsError(ProviderError):
    """No API key, or one the provider refused: permanent, and the message names the variable."""


class RateLimitError(ProviderError):
    """HTTP 429 or the provider's equivalent; `retry_after` seconds when it said so."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message, status_code=429, transient=True)
        self.retry_after = retry_after


class EvaluationTimeout(EvaluationError):
    """The evaluation took longer than its deadline."""

    transient = True
