"""Result sinks: evaluation results delivered to backends that keep them apart from spans."""

from tracefact.sinks.base import EvaluatedSpan, ResultSink
from tracefact.sinks.http import HTTPSink
from tracefact.sinks.mlflow import MLflowAssessments
from tracefact.sinks.phoenix import PhoenixAnnotations

__all__ = ["EvaluatedSpan", "HTTPSink", "MLflowAssessments", "PhoenixAnnotations", "ResultSink"]
