"""The evaluation pipeline: sampled LLM spans evaluated off the application's threads."""

from tracefact.pipeline.fanout import SpanObserver
from tracefact.pipeline.options import PipelineOptions
from tracefact.pipeline.outcome import Outcome
from tracefact.pipeline.processor import EvaluationProcessor
from tracefact.pipeline.wrapper import WrapperSpanProcessor

__all__ = [
    "EvaluationProcessor",
    "Outcome",
    "PipelineOptions",
    "SpanObserver",
    "WrapperSpanProcessor",
]
