"""Model files shipped inside the package (no download at run time)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def local_factuality_dir() -> Path:
    """Directory of the `LocalFactuality` model: model.onnx, tokenizer.json, config.json."""
    return Path(str(files("tracefact.models") / "local_factuality"))
