"""Evaluators: the protocol, result models and every evaluator.

Usable alone, with no tracing: ``await LexicalOverlap().evaluate(EvalCase(...))``.
"""

from tracefact.evaluators.base import (
    BadReplyError,
    EvalCase,
    EvalResult,
    EvaluationError,
    EvaluationTimeout,
    Evaluator,
    InvalidCaseError,
    ProviderError,
    RateLimitError,
)
from tracefact.evaluators.lexical import LexicalOverlap

__all__ = [
    "BadReplyError",
    "EvalCase",
    "EvalResult",
    "EvaluationError",
    "EvaluationTimeout",
    "Evaluator",
    "InvalidCaseError",
    "LexicalOverlap",
    "ProviderError",
    "RateLimitError",
]
