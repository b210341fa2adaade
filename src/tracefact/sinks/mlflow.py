"""`MLflowAssessments`: results as MLflow feedback on the trace.

MLflow (3.6 and later) ingests OTLP traces (`/v1/traces` with an
`x-mlflow-experiment-id` header) and keeps evaluations as assessments beside them.
MLflow creates assessments one at a time and answers 404 while the trace has not
arrived, so each result is its own request, retried until the trace is there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import httpx

from tracefact.sinks.base import EvaluatedSpan
from tracefact.sinks.http import HTTPSink, SinkRequest

SOURCE_TYPES = {"LLM": "LLM_JUDGE", "CODE": "CODE"}


class MLflowAssessments(HTTPSink):
    """Logs each result as a feedback assessment on the evaluated span's trace.

    The label as its value, the explanation as its rationale, the evaluator as its source, and the
    score, evaluator and unsupported claims as metadata (MLflow keeps one value).

    tracking_uri: the MLflow server's base URL. Other options are `HTTPSink`'s.
    """

    name = "mlflow-assessments"
    retry_not_found = True

    def __init__(self, tracking_uri: str = "http://127.0.0.1:5000", **options: Any) -> None:
        super().__init__(tracking_uri, **options)

    def deliveries(
        self, client: httpx.Client, batch: Sequence[EvaluatedSpan]
    ) -> Iterable[SinkRequest]:
        for evaluated in batch:
            trace_id = mlflow_trace_id(evaluated)
            body = {"assessment": self.assessment(evaluated)}
            path = f"/api/3.0/mlflow/traces/{trace_id}/assessments"
            yield [evaluated], client.build_request("POST", path, json=body)

    def assessment(self, evaluated: EvaluatedSpan) -> dict[str, Any]:
        result = evaluated.result
        metadata = {"score": repr(result.score), "evaluator": result.evaluator}
        if result.unsupported:
            metadata["unsupported"] = json.dumps(result.unsupported)
        return {
            "assessment_name": result.name,
            "trace_id": mlflow_trace_id(evaluated),
            "span_id": evaluated.span_id,
            "source": {
                "source_type": SOURCE_TYPES[result.annotator_kind],
                "source_id": result.evaluator,
            },
            "feedback": {"value": result.label},
            "rationale": result.explanation,
            "metadata": metadata,
        }


def mlflow_trace_id(evaluated: EvaluatedSpan) -> str:
    """MLflow names an OTLP-ingested trace `tr-` + its hex OpenTelemetry trace id."""
    return f"tr-{evaluated.trace_id}"
