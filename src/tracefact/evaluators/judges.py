"""LLM judges through litellm.

One verdict (`LLMJudge`), per statement (`ClaimJudge`), per context (`ContextVerdictJudge`).

They share one core: the prompt is built by `_prompts.build_messages` (evaluated text
as delimited data), the call is `_litellm.ask_json` (JSON reply validated against a
schema, errors mapped), and only the reading of the verdict differs. A reply that is
not a valid verdict raises `BadReplyError`; a judge never guesses.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import AliasChoices, BaseModel, Field, field_validator

from tracefact._imports import import_litellm
from tracefact.evaluators import _prompts
from tracefact.evaluators._litellm import (
    DEFAULT_TIMEOUT_SECONDS,
    JudgeReply,
    Reply,
    ask_json,
    check_credentials,
    report_once,
)
from tracefact.evaluators._prompts import JudgeExample
from tracefact.evaluators.base import (
    FACTUAL,
    HALLUCINATED,
    BadReplyError,
    CredentialsError,
    EvalCase,
    EvalResult,
    EvaluatorDescription,
    InvalidCaseError,
)
from tracefact.scrubbing import DEFAULT_SCRUBBER

__all__ = ["ClaimJudge", "ContextVerdictJudge", "JudgeExample", "LLMJudge"]

_SECRET_OPTIONS = frozenset({"api_key", "extra_headers", "headers"})


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


class _Verdict(BaseModel):
    verdict: Literal["factual", "hallucinated"]
    reasons: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("reasons", "reason")
    )

    _normalise = field_validator("verdict", mode="before")(_lower)

    @field_validator("reasons", mode="before")
    @classmethod
    def _one_reason_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class _Statement(BaseModel):
    statement: str
    score: int = Field(ge=0, le=1)
    reason: str = ""


class _Statements(BaseModel):
    statements: list[_Statement]


class _ContextVerdict(BaseModel):
    verdict: Literal["yes", "no"]
    reason: str = ""

    _normalise = field_validator("verdict", mode="before")(_lower)


class _ContextVerdicts(BaseModel):
    verdicts: list[_ContextVerdict]


class _Judge:
    """What every judge shares: model and litellm options, the call, timing and description."""

    kind: ClassVar[str]
    needs_contexts: bool = True

    def __init__(
        self,
        model: str,
        name: str,
        examples: Sequence[JudgeExample] | None,
        timeout: float,
        litellm_kwargs: dict[str, Any],
    ) -> None:
        if not model:
            raise ValueError("a judge needs a litellm model name, e.g. 'openai/gpt-4o-mini'")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self.name = name
        self.model = model
        self.examples = tuple(examples or ())
        self.timeout = timeout
        self.litellm_kwargs = litellm_kwargs

    def _settings(self) -> dict[str, Any]:
        """Options that change verdicts; part of `describe()` and so of cache keys."""
        return {}

    def check_credentials(self) -> None:
        """Raise `CredentialsError` now if the model's API key is missing.

        For callers about to judge many cases (the CLI): one clear error up front
        instead of one per case.
        """
        check_credentials(import_litellm(), self.model, self.litellm_kwargs)

    def warn_without_credentials(self) -> None:
        """Log, once, that the model's API key is missing.

        The pipeline calls this as it starts, on a thread of its own (litellm takes
        seconds to import).
        """
        try:
            self.check_credentials()
        except CredentialsError as error:
            report_once(error)

    def describe(self) -> EvaluatorDescription:
        options = {
            k: v
            for k, v in self.litellm_kwargs.items()
            if k not in _SECRET_OPTIONS and not DEFAULT_SCRUBBER.is_secret_name(k)
        }
        return EvaluatorDescription(
            name=self.name,
            evaluator=self.kind,
            source="llm",
            model=self.model,
            settings={
                **self._settings(),
                "examples": len(self.examples),
                "litellm_options": options,
            },
        )

    async def _ask(
        self, instructions: str, case: EvalCase, schema: type[Reply]
    ) -> JudgeReply[Reply]:
        if self.needs_contexts and not case.contexts:
            raise InvalidCaseError(f"{type(self).__name__} needs at least one context")
        messages = _prompts.build_messages(instructions, case, self.examples)
        options = {"timeout": self.timeout, **self.litellm_kwargs}
        return await ask_json(self.model, messages, schema, options)

    def _result(
        self,
        reply: JudgeReply[Any],
        started: float,
        *,
        score: float,
        hallucinated: bool,
        explanation: str,
        unsupported: list[str],
        raw: dict[str, Any],
    ) -> EvalResult:
        return EvalResult(
            name=self.name,
            label=HALLUCINATED if hallucinated else FACTUAL,
            score=score,
            explanation=explanation,
            unsupported=unsupported,
            evaluator=f"{self.kind}({self.model})",
            latency_ms=(time.perf_counter() - started) * 1000,
            cost_usd=reply.cost_usd,
            annotator_kind="LLM",
            raw={**raw, "model": self.model, **reply.usage()},
        )


class LLMJudge(_Judge):
    """A binary factual/hallucinated verdict with reasons, in the Phoenix or Opik manner.

    ``style="phoenix"`` judges against the contexts only and requires them; ``"opik"``
    is stricter about partial hallucinations and, without contexts, falls back to
    general knowledge. Score 1.0 = hallucinated, 0.0 = factual.
    """

    kind = "llm-judge"

    def __init__(
        self,
        model: str,
        style: Literal["phoenix", "opik"] = "phoenix",
        examples: Sequence[JudgeExample] | None = None,
        name: str = "hallucination",
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        **litellm_kwargs: Any,
    ) -> None:
        if style not in ("phoenix", "opik"):
            raise ValueError(f"style must be 'phoenix' or 'opik', got {style!r}")
        super().__init__(model, name, examples, timeout, litellm_kwargs)
        self.style = style
        self.needs_contexts = style == "phoenix"

    def _settings(self) -> dict[str, Any]:
        return {"style": self.style}

    async def evaluate(self, case: EvalCase) -> EvalResult:
        started = time.perf_counter()
        instructions = _prompts.PHOENIX if self.style == "phoenix" else _prompts.OPIK
        reply = await self._ask(instructions, case, _Verdict)
        verdict = reply.value
        hallucinated = verdict.verdict == HALLUCINATED
        return self._result(
            reply,
            started,
            score=1.0 if hallucinated else 0.0,
            hallucinated=hallucinated,
            explanation="; ".join(verdict.reasons) or verdict.verdict,
            unsupported=[],
            raw={"verdict": verdict.verdict, "reasons": verdict.reasons, "style": self.style},
        )


class _ScoreJudge(_Judge):
    """A judge whose score is a share (of statements, of contexts).

    Hallucinated above ``threshold``.
    """

    def __init__(
        self,
        model: str,
        name: str,
        examples: Sequence[JudgeExample] | None,
        timeout: float,
        litellm_kwargs: dict[str, Any],
        threshold: float,
    ) -> None:
        if not 0.0 <= threshold < 1.0:
            raise ValueError(f"threshold must be within [0, 1), got {threshold}")
        super().__init__(model, name, examples, timeout, litellm_kwargs)
        self.threshold = threshold

    def _settings(self) -> dict[str, Any]:
        return {"threshold": self.threshold}


class ClaimJudge(_ScoreJudge):
    """Splits the answer into statements and checks each (Haystack faithfulness).

    Score = share of the statements the contexts do not support; they are listed in
    `unsupported`, and `raw` keeps `statements` and `statement_scores` (1 = supported).
    """

    kind = "claim-judge"

    def __init__(
        self,
        model: str,
        examples: Sequence[JudgeExample] | None = None,
        name: str = "hallucination",
        threshold: float = 0.0,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        **litellm_kwargs: Any,
    ) -> None:
        super().__init__(model, name, examples, timeout, litellm_kwargs, threshold)

    async def evaluate(self, case: EvalCase) -> EvalResult:
        started = time.perf_counter()
        reply = await self._ask(_prompts.CLAIMS, case, _Statements)
        statements = reply.value.statements
        unsupported = [s.statement for s in statements if s.score == 0]
        score = len(unsupported) / len(statements) if statements else 0.0
        if not statements:
            explanation = "The answer makes no factual statement."
        elif unsupported:
            explanation = f"{len(unsupported)} of {len(statements)} statements are not supported: "
            explanation += " | ".join(
                f"{s.statement} ({s.reason})" if s.reason else s.statement
                for s in statements
                if s.score == 0
            )
        else:
            explanation = f"All {len(statements)} statements are supported by the contexts."
        return self._result(
            reply,
            started,
            score=score,
            hallucinated=score > self.threshold,
            explanation=explanation,
            unsupported=unsupported,
            raw={
                "statements": [s.statement for s in statements],
                "statement_scores": [s.score for s in statements],
                "reasons": [s.reason for s in statements],
                "faithfulness": 1.0 - score if statements else None,
            },
        )


class ContextVerdictJudge(_ScoreJudge):
    """A yes (agrees) / no (contradicts) verdict per context item (DeepEval hallucination).

    Score = contradicted contexts / contexts; hallucinated when score > threshold, so
    `success` (DeepEval's pass) is score <= threshold. Per-context reasons are in `raw`.
    """

    kind = "context-judge"

    def __init__(
        self,
        model: str,
        threshold: float = 0.5,
        examples: Sequence[JudgeExample] | None = None,
        name: str = "hallucination",
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        **litellm_kwargs: Any,
    ) -> None:
        super().__init__(model, name, examples, timeout, litellm_kwargs, threshold)

    async def evaluate(self, case: EvalCase) -> EvalResult:
        started = time.perf_counter()
        reply = await self._ask(_prompts.CONTEXTS, case, _ContextVerdicts)
        verdicts = reply.value.verdicts
        if len(verdicts) != len(case.contexts):
            raise BadReplyError(
                f"judge gave {len(verdicts)} verdicts for {len(case.contexts)} contexts",
                reply=reply.text,
                cost_usd=reply.cost_usd,
            )
        contradicted = [
            v.reason or f"context {i}" for i, v in enumerate(verdicts, 1) if v.verdict == "no"
        ]
        score = len(contradicted) / len(verdicts)
        success = score <= self.threshold
        explanation = f"{len(contradicted)} of {len(verdicts)} contexts contradict the answer" + (
            ": " + " | ".join(contradicted) if contradicted else "."
        )
        return self._result(
            reply,
            started,
            score=score,
            hallucinated=not success,
            explanation=explanation,
            unsupported=contradicted,
            raw={
                "verdicts": [v.model_dump() for v in verdicts],
                "threshold": self.threshold,
                "success": success,
            },
        )
