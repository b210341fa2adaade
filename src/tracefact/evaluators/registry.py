"""Evaluators by name, for the CLI and `TRACEFACT_EVALUATORS`.

A spec is ``name`` or ``name:argument``: ``lexical``, ``lexical:0.2``, ``local``,
``local:0.4`` (a threshold), ``judge:MODEL``, ``claims:MODEL``, ``contexts:MODEL``,
``vectara``. Each factory imports only what its evaluator needs, so naming ``lexical``
never imports litellm or onnxruntime.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from tracefact.errors import ConfigurationError
from tracefact.evaluators.base import Evaluator

SPECS = "local | lexical | judge:MODEL | claims:MODEL | contexts:MODEL | vectara"

DEFAULT_SPEC = "local"
"""The one default evaluator (configure, TRACEFACT_EVALUATORS unset, the CLI): offline."""

JUDGES = ("judge", "claims", "contexts")
"""Specs of the evaluators that call a model through litellm."""

Factory = Callable[[str | None, str | None], Evaluator]
"""(argument, api_base) to an evaluator."""


def _threshold(argument: str | None) -> float | None:
    return None if argument is None else float(argument)


def _lexical(argument: str | None, api_base: str | None) -> Evaluator:
    from tracefact.evaluators.lexical import LexicalOverlap

    threshold = _threshold(argument)
    return LexicalOverlap() if threshold is None else LexicalOverlap(threshold=threshold)


def _local(argument: str | None, api_base: str | None) -> Evaluator:
    from tracefact.evaluators.local import LocalFactuality

    return LocalFactuality(threshold=_threshold(argument))


def _vectara(argument: str | None, api_base: str | None) -> Evaluator:
    from tracefact.evaluators.vectara import VectaraHHEM

    return VectaraHHEM() if api_base is None else VectaraHHEM(base_url=api_base)


def _judge(kind: str) -> Factory:
    def factory(argument: str | None, api_base: str | None) -> Evaluator:
        from tracefact.evaluators import judges

        if not argument:
            raise ValueError(f"evaluator {kind!r} needs a model: {kind}:MODEL")
        judge_class: type[judges.LLMJudge | judges.ClaimJudge | judges.ContextVerdictJudge]
        judge_class = {
            "judge": judges.LLMJudge,
            "claims": judges.ClaimJudge,
            "contexts": judges.ContextVerdictJudge,
        }[kind]
        options: dict[str, Any] = {} if api_base is None else {"api_base": api_base}
        return judge_class(argument, **options)

    return factory


_FACTORIES: dict[str, Factory] = {
    "lexical": _lexical,
    "local": _local,
    "vectara": _vectara,
    **{kind: _judge(kind) for kind in JUDGES},
}


class Imported(Protocol):
    """An evaluator of one's own: a factory by import path, called with keyword arguments."""

    @property
    def import_path(self) -> str: ...  # ``package.module:factory``

    @property
    def kwargs(self) -> Mapping[str, Any]: ...


def build_evaluators(
    specs: Sequence[str | Imported], api_base: str | None = None, where: str = "evaluators"
) -> list[Evaluator]:
    """Evaluators from specs and imported factories: the one place settings build them.

    For configure's TRACEFACT_EVALUATORS and the collector's `evaluation.evaluators`.

    Raises:
        ConfigurationError: naming `where` and the entry, for a spec that does not build
            or evaluator names that repeat.
    """
    evaluators = []
    for index, spec in enumerate(specs):
        try:
            evaluator = from_spec(spec, api_base) if isinstance(spec, str) else _imported(spec)
        except Exception as exc:
            raise ConfigurationError(f"{where}.{index}: {exc}") from None
        evaluators.append(evaluator)
    names = [e.name for e in evaluators]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"{where}: names must be unique, got {names}")
    return evaluators


def _imported(spec: Imported) -> Evaluator:
    module_name, _, attribute = spec.import_path.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    evaluator = target(**spec.kwargs)
    if not callable(getattr(evaluator, "evaluate", None)) or not hasattr(evaluator, "name"):
        raise TypeError(f"{spec.import_path} returned {type(evaluator).__name__}, not an Evaluator")
    return evaluator  # type: ignore[no-any-return]


def default_evaluators() -> list[Evaluator]:
    """The offline default: the embedded local model, no key, no network."""
    return [from_spec(DEFAULT_SPEC)]


def from_spec(spec: str, api_base: str | None = None) -> Evaluator:
    """An evaluator from its spec; ``api_base`` points judges (or Vectara) elsewhere."""
    name, _, argument = spec.strip().partition(":")
    factory = _FACTORIES.get(name)
    if factory is None:
        raise ValueError(f"unknown evaluator {spec!r}; use one of: {SPECS}")
    return factory(argument or None, api_base)
