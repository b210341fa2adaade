"""A span's group value by a group-by name (model, service, route, prompt_version, any name).

One reader for the live rate's groups and the review's strata.
"""

from __future__ import annotations

from collections.abc import Mapping

from tracefact import semconv


def group_value(name: str, attributes: Mapping[str, object], resource: Mapping[str, object]) -> str:
    """The first of the name's attributes found on the span, then its resource; `(none)`."""
    for key in semconv.GROUP_ALIASES.get(name, (name,)):
        for source in (attributes, resource):
            value = source.get(key)
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                return str(value) or semconv.GROUP_MISSING
    return semconv.GROUP_MISSING
