"""The evaluation pipeline: sampled LLM spans evaluated off the application's threads."""

from tracefact.pipeline.enrich import Outcome
from tracefact.pipeline.processor import EvaluationProcessor
from tracefact.pipeline.wrapper import WrapperSpanProcessor

__all__ = ["EvaluationProcessor", "Outcome", "WrapperSpanProcessor"]
