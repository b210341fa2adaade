"""`LocalFactuality`, the embedded offline evaluator, and the pieces it is made of.

- `windows`: how a case becomes model inputs (shared with the training script);
- `alignment`: literal evidence features per answer sentence;
- `config`: the shipped model's parameters and combiner;
- `runtime`: the ONNX session and tokenizer, loaded once per process;
- `batching`: concurrent calls gathered into one batch call;
- `evaluator`: `LocalFactuality` itself, the combiner and the explanation.
"""

from tracefact.evaluators.local.evaluator import LocalFactuality, SentenceEvidence
from tracefact.evaluators.local.runtime import model_dir

__all__ = ["LocalFactuality", "SentenceEvidence", "model_dir"]
