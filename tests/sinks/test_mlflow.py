"""MLflowAssessments against a local server implementing MLflow's assessment contract."""

from __future__ import annotations

import json
import time

from tests.fakes.mlflow_server import fake_mlflow
from tests.sinks.conftest import SinkCounts
from tests.sinks.helpers import FAST, evaluated
from tracefact.sinks import MLflowAssessments

SINK = "mlflow-assessments"


def test_each_result_becomes_feedback_on_its_trace_and_span(sink_counts: SinkCounts) -> None:
    judged = evaluated("hallucinated", annotator_kind="LLM")
    with fake_mlflow() as mlflow:
        mlflow.traces.add(f"tr-{judged.trace_id}")
        sink = MLflowAssessments(mlflow.base_url, meter_provider=sink_counts.provider, **FAST)
        sink.submit(judged)
        assert sink.force_flush(5000)
        sink.shutdown()
    (assessment,) = mlflow.assessments
    assert assessment["trace_id"] == f"tr-{judged.trace_id}"
    assert assessment["span_id"] == judged.span_id
    assert assessment["assessment_name"] == "hallucination"
    assert assessment["source"] == {"source_type": "LLM_JUDGE", "source_id": "judge(gpt-test)"}
    assert assessment["feedback"] == {"value": "hallucinated"}
    assert assessment["rationale"] == "because hallucinated"
    assert float(assessment["metadata"]["score"]) == 0.9
    assert json.loads(assessment["metadata"]["unsupported"]) == ["Paris is in Spain."]
    assert sink_counts() == {(SINK, "delivered"): 1}


def test_a_result_waits_for_its_trace_to_arrive() -> None:
    late = evaluated("factual")
    with fake_mlflow() as mlflow:
        # Enough retries to outlast the arrival however slowly this machine runs.
        sink = MLflowAssessments(mlflow.base_url, max_retries=100, **FAST)
        sink.submit(late)
        deadline = time.monotonic() + 10
        while not mlflow.api.requests and time.monotonic() < deadline:
            time.sleep(0.01)  # the trace arrives only after the first attempt got its 404
        mlflow.traces.add(f"tr-{late.trace_id}")
        assert sink.force_flush(5000)
        sink.shutdown()
    assert [a["source"]["source_type"] for a in mlflow.assessments] == ["CODE"]
    assert len(mlflow.api.requests) > 1  # 404s first, retried


def test_one_missing_trace_does_not_hold_back_the_others(sink_counts: SinkCounts) -> None:
    present, missing = evaluated(), evaluated()
    with fake_mlflow() as mlflow:
        mlflow.traces.add(f"tr-{present.trace_id}")
        sink = MLflowAssessments(
            mlflow.base_url, max_retries=3, meter_provider=sink_counts.provider, **FAST
        )
        sink.submit(missing)
        sink.submit(present)
        assert sink.force_flush(5000)
        sink.shutdown()
    assert [a["trace_id"] for a in mlflow.assessments] == [f"tr-{present.trace_id}"]
    assert sink_counts() == {(SINK, "delivered"): 1, (SINK, "failed"): 1}
