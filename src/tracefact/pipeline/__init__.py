"""The evaluation pipeline: sampled LLM spans evaluated off the application's threads.

`Pipeline` is the part both hosts share (span records in, verdicts out);
`EvaluationProcessor` is its host in an application's OpenTelemetry SDK.
"""

from tracefact.pipeline.core import Pipeline
from tracefact.pipeline.delivery import SpanObserver
from tracefact.pipeline.options import PipelineOptions
from tracefact.pipeline.processor import EvaluationProcessor
from tracefact.pipeline.verdict import Outcome, Record, SpanRecord, Verdict
from tracefact.pipeline.wrapper import WrapperSpanProcessor

__all__ = [
    "EvaluationProcessor",
    "Outcome",
    "Pipeline",
    "PipelineOptions",
    "Record",
    "SpanObserver",
    "SpanRecord",
    "Verdict",
    "WrapperSpanProcessor",
]
