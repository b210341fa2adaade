"""MLflow's assessment contract on a real local server.

The route is `POST /api/3.0/mlflow/traces/{trace_id}/assessments`.

Answers 404 RESOURCE_DOES_NOT_EXIST for traces it has not received (as MLflow does
before the spans arrive), 400 for bodies its protobuf parser would reject, and keeps
the assessments it created.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.fakes.json_api import JSONAPI, Request, json_api

SOURCE_TYPES = {"HUMAN", "LLM_JUDGE", "CODE"}


class FakeMLflow:
    def __init__(self, api: JSONAPI) -> None:
        self.api = api
        self.traces: set[str] = set()
        self.assessments: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        api.route("POST", r"/api/3\.0/mlflow/traces/(?P<trace_id>[^/]+)/assessments", self.create)

    @property
    def base_url(self) -> str:
        return self.api.base_url

    def create(self, request: Request) -> tuple[int, Any]:
        trace_id = request.params["trace_id"]
        assessment = request.body.get("assessment") if isinstance(request.body, dict) else None
        if not valid_assessment(assessment):
            return 400, {"error_code": "INVALID_PARAMETER_VALUE", "message": "bad assessment"}
        if trace_id not in self.traces:
            message = f"Trace with ID '{trace_id}' not found."
            return 404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": message}
        created = {**assessment, "trace_id": trace_id, "assessment_id": f"a-{next(self._ids)}"}
        self.assessments.append(created)
        return 200, {"assessment": created}


def valid_assessment(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    source = item.get("source")
    metadata = item.get("metadata", {})
    return (
        isinstance(item.get("assessment_name"), str)
        and isinstance(source, dict)
        and source.get("source_type") in SOURCE_TYPES
        and isinstance(item.get("feedback"), dict)
        and "value" in item["feedback"]
        and isinstance(metadata, dict)
        and all(isinstance(v, str) for v in metadata.values())  # map<string, string>
    )


@contextmanager
def fake_mlflow() -> Iterator[FakeMLflow]:
    with json_api() as api:
        yield FakeMLflow(api)
