"""Selection for review rides on the verdict: decided on the worker, applied by each host."""

from __future__ import annotations

import tracefact
from tests.conftest import Spans
from tests.pipeline.helpers import ScriptedEvaluator
from tracefact import semconv
from tracefact.collector.config import parse
from tracefact.config import ReviewOptions, resolve


def answer(output: str, route: str = "/chat") -> None:
    with tracefact.span("answer", kind="llm") as span:
        span.span.set_attribute("http.route", route)
        span.record(input="q", contexts=["ctx"], output=output)


def test_evaluated_spans_carry_their_stratum_probability_and_selection(spans: Spans) -> None:
    spans.reconfigure(
        evaluators=[ScriptedEvaluator()],
        review_probabilities={"/chat/hallucinated": 1.0, "factual": 0.0, "*": 0.5},
        review_group_by=["route"],
    )
    answer("hallucinated")
    answer("ok")
    answer("error")
    by_output = {s.attributes["output.value"]: s.attributes for s in spans.all()}
    flagged, passed, failed = by_output["hallucinated"], by_output["ok"], by_output["error"]
    assert flagged[semconv.REVIEW_STRATUM] == "/chat/hallucinated"
    assert flagged[semconv.REVIEW_PROBABILITY] == 1.0
    assert flagged[semconv.REVIEW_SELECTED] is True
    assert flagged[semconv.REVIEW_EVALUATOR] == "hallucination"
    assert passed[semconv.REVIEW_STRATUM] == "/chat/factual"
    assert passed[semconv.REVIEW_SELECTED] is False
    assert failed[semconv.REVIEW_STRATUM] == "/chat/none"
    assert failed[semconv.REVIEW_PROBABILITY] == 0.5


def test_spans_not_evaluated_carry_no_selection(spans: Spans) -> None:
    spans.reconfigure(
        evaluators=[ScriptedEvaluator()], review_probabilities={"*": 1.0}, sample_rate=0.0
    )
    answer("hallucinated")
    (span,) = spans.all()
    assert span.attributes[semconv.EVAL_STATUS] == semconv.STATUS_SAMPLED_OUT
    assert semconv.REVIEW_SELECTED not in span.attributes


def test_review_off_by_default(spans: Spans) -> None:
    spans.reconfigure(evaluators=[ScriptedEvaluator()])
    answer("hallucinated")
    (span,) = spans.all()
    assert not any(key.startswith("tracefact.review.") for key in span.attributes)


def test_review_settings_from_the_environment_and_the_collector_yaml() -> None:
    resolved = resolve(
        {}, {}, {"TRACEFACT_REVIEW_LABELS_PER_DAY": "200", "TRACEFACT_REVIEW_GROUP_BY": "route"}
    )
    assert resolved.review == ReviewOptions(labels_per_day=200, group_by=("route",))
    config = parse(
        {
            "upstreams": [{"endpoint": "http://127.0.0.1:9"}],
            "evaluation": {"review": {"probabilities": {"*": 0.1}, "min_labels": 20}},
        },
        environ={},
    )
    assert config.evaluation.review.probabilities == {"*": 0.1}
    assert config.evaluation.review.sampler() is not None


def test_a_share_of_the_selected_spans_is_marked_for_a_second_reviewer(spans: Spans) -> None:
    spans.reconfigure(
        evaluators=[ScriptedEvaluator()],
        review_probabilities={"hallucinated": 1.0, "factual": 0.0},
        review_double_share=0.5,
    )
    for _ in range(40):
        answer("hallucinated")
        answer("ok")
    chosen = [s.attributes for s in spans.all() if s.attributes[semconv.REVIEW_SELECTED]]
    passed = [s.attributes for s in spans.all() if not s.attributes[semconv.REVIEW_SELECTED]]
    assert len(chosen) == 40 and len(passed) == 40
    second = [a[semconv.REVIEW_SECOND_REVIEWER] for a in chosen]
    assert 5 < sum(second) < 35  # about half, drawn on the span id
    assert not any(semconv.REVIEW_SECOND_REVIEWER in a for a in passed)


def test_no_second_reviewer_unless_configured(spans: Spans) -> None:
    spans.reconfigure(evaluators=[ScriptedEvaluator()], review_probabilities={"*": 1.0})
    answer("hallucinated")
    (span,) = spans.all()
    assert span.attributes[semconv.REVIEW_SELECTED] is True
    assert semconv.REVIEW_SECOND_REVIEWER not in span.attributes
    assert resolve({}, {}, {"TRACEFACT_REVIEW_DOUBLE_SHARE": "0.2"}).review.double_share == 0.2
