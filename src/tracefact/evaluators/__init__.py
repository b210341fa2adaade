"""Evaluators: the protocol, result models and every evaluator.

Usable alone, with no tracing: ``await LexicalOverlap().evaluate(EvalCase(...))``.
The evaluators themselves are imported on first use, so that importing tracefact does
not import httpx or the model runtime for evaluators an application never uses.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from tracefact.evaluators.base import (
    BadReplyError,
    CredentialsError,
    EvalCase,
    EvalResult,
    EvaluationError,
    EvaluationTimeout,
    Evaluator,
    EvaluatorDescription,
    InvalidCaseError,
    ProviderError,
    RateLimitError,
)

if TYPE_CHECKING:
    from tracefact.evaluators.cached import Cached
    from tracefact.evaluators.cascade import Cascade
    from tracefact.evaluators.judges import (
        ClaimJudge,
        ContextVerdictJudge,
        JudgeExample,
        LLMJudge,
    )
    from tracefact.evaluators.lexical import LexicalOverlap
    from tracefact.evaluators.local import LocalFactuality
    from tracefact.evaluators.vectara import VectaraHHEM

_MODULE_OF = {
    "Cached": "cached",
    "Cascade": "cascade",
    "ClaimJudge": "judges",
    "ContextVerdictJudge": "judges",
    "JudgeExample": "judges",
    "LLMJudge": "judges",
    "LexicalOverlap": "lexical",
    "LocalFactuality": "local",
    "VectaraHHEM": "vectara",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)


__all__ = [
    "BadReplyError",
    "Cached",
    "Cascade",
    "ClaimJudge",
    "ContextVerdictJudge",
    "CredentialsError",
    "EvalCase",
    "EvalResult",
    "EvaluationError",
    "EvaluationTimeout",
    "Evaluator",
    "EvaluatorDescription",
    "InvalidCaseError",
    "JudgeExample",
    "LLMJudge",
    "LexicalOverlap",
    "LocalFactuality",
    "ProviderError",
    "RateLimitError",
    "VectaraHHEM",
]
