"""`PhoenixAnnotations`: results as Arize Phoenix span annotations.

Phoenix shows span attributes but does not turn them into its evaluation annotations;
its span annotations API (`POST /v1/span_annotations`) does. Results are posted
asynchronously (Phoenix's default), so an annotation that arrives before its span is
kept by Phoenix and applied when the span lands.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import httpx

from tracefact.sinks.base import EvaluatedSpan
from tracefact.sinks.http import HTTPSink, SinkRequest


class PhoenixAnnotations(HTTPSink):
    """Posts each result as a span annotation.

    Name, annotator kind (LLM or CODE), label, score, explanation, and the evaluator and unsupported
    claims as metadata.

    endpoint: Phoenix's base URL. api_key: sent as a bearer token when Phoenix has
    authentication on. identifier: makes a re-sent annotation replace the first one
    instead of adding a duplicate. Other options are `HTTPSink`'s.
    """

    name = "phoenix-annotations"

    def __init__(
        self,
        endpoint: str = "http://127.0.0.1:6006",
        *,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        identifier: str = "tracefact",
        **options: Any,
    ) -> None:
        if api_key:
            headers = {**(headers or {}), "Authorization": f"Bearer {api_key}"}
        super().__init__(endpoint, headers=headers, **options)
        self.identifier = identifier

    def deliveries(
        self, client: httpx.Client, batch: Sequence[EvaluatedSpan]
    ) -> Iterable[SinkRequest]:
        body = {"data": [self.annotation(evaluated) for evaluated in batch]}
        yield batch, client.build_request("POST", "/v1/span_annotations", json=body)

    def annotation(self, evaluated: EvaluatedSpan) -> dict[str, Any]:
        result = evaluated.result
        metadata: dict[str, Any] = {"evaluator": result.evaluator}
        if result.unsupported:
            metadata["unsupported"] = result.unsupported
        if result.cost_usd is not None:
            metadata["cost_usd"] = result.cost_usd
        return {
            "span_id": evaluated.span_id,
            "name": result.name,
            "annotator_kind": result.annotator_kind,
            "result": {
                "label": result.label,
                "score": result.score,
                "explanation": result.explanation,
            },
            "metadata": metadata,
            "identifier": self.identifier,
        }
