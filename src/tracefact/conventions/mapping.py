"""The user's mapping from a span to question, answer and contexts, for spans no convention covers.

Either a callable taking the span's attributes and returning a dict with any of "question",
"answer", "contexts", or a declarative dict from those names to paths: ``"attribute.key"`` or
``"attribute.key#json.path"``. A `*` in the attribute key stands for 0, 1, 2... (flattened lists, as
in ``"my.docs.*.text"``); in the JSON path it stands for every item of a list
(``"input.value#documents.*.page_content"``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from tracefact.conventions._json import loads, text_of

logger = logging.getLogger("tracefact")

FIELDS = ("question", "answer", "contexts")
MappingFunction = Callable[[Mapping[str, Any]], Mapping[str, Any] | None]
SpanMapping = MappingFunction | Mapping[str, str]
MAX_ITEMS = 1000


def compile_mapping(mapping: SpanMapping) -> MappingFunction:
    """The mapping as a function; a declarative one is checked here (ValueError)."""
    if callable(mapping):
        return mapping
    if not isinstance(mapping, Mapping):
        raise ValueError(f"span_mapping must be a callable or a dict, not {type(mapping)}")
    unknown = set(mapping) - set(FIELDS)
    if unknown:
        raise ValueError(f"span_mapping keys must be among {FIELDS}, not {sorted(unknown)}")
    for path in mapping.values():
        if not isinstance(path, str) or not path.split("#", 1)[0]:
            raise ValueError(f"span_mapping paths are 'attribute[#json.path]', not {path!r}")
    paths = dict(mapping)

    def apply(attributes: Mapping[str, Any]) -> dict[str, Any]:
        return {name: resolve(attributes, path) for name, path in paths.items()}

    return apply


def apply_mapping(function: MappingFunction, attributes: Mapping[str, Any]) -> dict[str, Any]:
    """What the mapping found, checked.

    Question and answer as text, contexts as a list of texts; a failing mapping is logged
    and finds nothing.
    """
    try:
        found = function(attributes)
    except Exception:
        logger.exception("tracefact: span_mapping failed")
        return {}
    if not isinstance(found, Mapping):
        return {}
    result: dict[str, Any] = {}
    for name in ("question", "answer"):
        texts = _texts(found.get(name))
        if texts:
            result[name] = "\n".join(texts)
    contexts = _texts(found.get("contexts"))
    if contexts:
        result["contexts"] = contexts
    return result


def resolve(attributes: Mapping[str, Any], path: str) -> list[Any]:
    """Every value at `path` (see the module's docstring), in order."""
    key, _, json_path = path.partition("#")
    if "*" in key:
        values = []
        for i in range(MAX_ITEMS):
            value = attributes.get(key.replace("*", str(i), 1))
            if value is None:
                break
            values.append(value)
    else:
        value = attributes.get(key)
        values = [] if value is None else [value]
    if not json_path:
        return values
    found: list[Any] = []
    for value in values:
        decoded = loads(value)
        if decoded is not None:
            found += _walk(decoded, json_path.split("."))
    return found


def _walk(value: Any, steps: list[str]) -> list[Any]:
    current = [value]
    for step in steps:
        following: list[Any] = []
        for item in current:
            if step == "*" and isinstance(item, list):
                following += item[:MAX_ITEMS]
            elif isinstance(item, dict) and step in item:
                following.append(item[step])
            elif isinstance(item, list) and step.isdigit() and int(step) < len(item):
                following.append(item[int(step)])
        current = following
    return current


def _texts(value: Any) -> list[str]:
    items = value if isinstance(value, (list, tuple)) else [value]
    texts = [text_of(item) for item in items[:MAX_ITEMS]]
    return [t for t in texts if t and t.strip()]
