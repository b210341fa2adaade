"""Evaluators by name, for the CLI and `TRACEFACT_EVALUATORS`: ``lexical`` and so on."""

from __future__ import annotations

from collections.abc import Callable

from tracefact.evaluators.base import Evaluator


def _lexical(argument: str | None) -> Evaluator:
    from tracefact.evaluators.lexical import LexicalOverlap

    return LexicalOverlap() if argument is None else LexicalOverlap(threshold=float(argument))


_FACTORIES: dict[str, Callable[[str | None], Evaluator]] = {"lexical": _lexical}


def default_evaluators() -> list[Evaluator]:
    """The offline default: no key, no network."""
    return [from_spec("lexical")]


def from_spec(spec: str) -> Evaluator:
    """``name`` or ``name:argument`` (for example a model) to an evaluator."""
    name, _, argument = spec.strip().partition(":")
    factory = _FACTORIES.get(name)
    if factory is None:
        raise ValueError(f"unknown evaluator {name!r}; known: {', '.join(sorted(_FACTORIES))}")
    return factory(argument or None)
