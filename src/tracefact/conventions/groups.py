"""A span's group value by a group-by name (model, service, route, prompt_version, any name).

One reader for the live rate's groups and the review's strata.
"""

from __future__ import annotations

from collections.abc import Mapping

from tracefact import semconv
from tracefact.scrubbing import SCRUBBED, clean_text, current_scrubber


def group_value(name: str, attributes: Mapping[str, object], resource: Mapping[str, object]) -> str:
    """The first of the name's attributes found on the span, then its resource; `(none)`.

    Scrubbed like everything tracefact writes: a metric label or a stratum may otherwise
    carry a key in a model name or a token under a secret name.
    """
    for key in semconv.GROUP_ALIASES.get(name, (name,)):
        for source in (attributes, resource):
            value = source.get(key)
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                scrubber = current_scrubber()
                if scrubber is not None and scrubber.is_secret_name(key):
                    return SCRUBBED
                return clean_text(str(value)) or semconv.GROUP_MISSING
    return semconv.GROUP_MISSING
