"""Optional dependencies, imported on first use with the settings tracefact needs."""

from __future__ import annotations

import os
from typing import Any


def import_litellm() -> Any:
    """litellm, which never reaches the network on import.

    Importing litellm costs seconds, so it happens only when a judge or the litellm
    instrumentation is first used; unless the user chose otherwise, litellm reads its
    price table from the package instead of downloading it (and retrying for seconds
    when offline).
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm
