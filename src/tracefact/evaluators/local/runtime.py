"""The loaded model: ONNX session, tokenizer and config, one per directory per process.

``onnxruntime``, ``tokenizers`` and ``numpy`` are imported here only, on first use.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from tracefact.evaluators.local.config import ModelConfig
from tracefact.evaluators.local.inputs import HFTokenizer, ModelInput


def model_dir() -> Path:
    """Where the shipped model lives (``tracefact/models/local_factuality``)."""
    from tracefact.models import local_factuality_dir

    return local_factuality_dir()


class Runtime:
    """The loaded model: ONNX session, tokenizer and config. One per directory per process."""

    def __init__(self, directory: Path) -> None:
        import numpy as np
        import onnxruntime as ort  # type: ignore[import-untyped,unused-ignore]

        started = time.perf_counter()
        with open(directory / "config.json", encoding="utf-8") as handle:
            self.config = ModelConfig.from_dict(json.load(handle))
        self.tokenizer = HFTokenizer(directory / "tokenizer.json")
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, os.cpu_count() or 1)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(
            str(directory / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self._np = np
        self._lock = threading.Lock()
        self.load_seconds = time.perf_counter() - started

    def logits(self, inputs: list[ModelInput]) -> list[float]:
        """One logit per input (how unsupported its sentence is), one unpadded run each.

        On 2 cores single runs measured as fast as padded batches or faster, and int8
        activations are quantised per run: an input's logit never depends on which
        other cases arrived with it, so `tracefact eval` and the live pipeline agree.
        """
        np = self._np
        results: list[float] = []
        for item in inputs:
            ids = np.array([item.ids], dtype=np.int64)
            feeds = {
                "input_ids": ids,
                "attention_mask": np.ones_like(ids),
                "token_type_ids": np.array([item.type_ids], dtype=np.int64),
            }
            with self._lock:
                (logit,) = self.session.run(None, feeds)
            results.append(float(logit.reshape(-1)[0]))
        return results


_LOADED: dict[Path, Runtime] = {}
_LOADED_LOCK = threading.Lock()


def load_runtime(directory: Path) -> Runtime:
    with _LOADED_LOCK:
        runtime = _LOADED.get(directory)
        if runtime is None:
            runtime = Runtime(directory)
            _LOADED[directory] = runtime
        return runtime
