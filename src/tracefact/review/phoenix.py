"""Review in Arize Phoenix: a categorical annotation config for reviewers, their labels back.

Selected spans carry `tracefact.review.selected`, so reviewers filter on it in Phoenix;
`ensure_annotation_config` creates the categorical config (hallucinated, factual, unsure)
they label with, and `assign_to_project` puts it in the project's annotation panel.
`poll_labels` reads back the HUMAN annotations under that name through
`GET /v1/projects/{project}/span_annotations`, which needs span ids: the selected ids go in
batches. Only one process polls (the CLI, `tracefact report`, or the collector); app
processes never do.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

import httpx

from tracefact import semconv
from tracefact.review.ledger import Label

BATCH = 100
"""Span ids per annotations request (they travel in the query string)."""
HUMAN = "HUMAN"


def client(endpoint: str, api_key: str | None = None, timeout: float = 10.0) -> httpx.Client:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(base_url=endpoint.rstrip("/"), headers=headers, timeout=timeout)


def ensure_annotation_config(
    http: httpx.Client, name: str = semconv.REVIEW_ANNOTATION_NAME
) -> bool:
    """Create the categorical annotation config reviewers label with; False if it existed."""
    body = {
        "name": name,
        "type": "CATEGORICAL",
        "description": "tracefact review: is the answer supported by its contexts? "
        "Label the spans with tracefact.review.selected = true.",
        "optimization_direction": "MINIMIZE",
        "values": [
            {"label": semconv.REVIEW_VERDICT_HALLUCINATED, "score": 1.0},
            {"label": semconv.REVIEW_VERDICT_FACTUAL, "score": 0.0},
            {"label": semconv.REVIEW_LABEL_UNSURE},
        ],
    }
    response = http.post("/v1/annotation_configs", json=body)
    if response.status_code == 409:
        return False
    response.raise_for_status()
    return True


def assign_to_project(
    http: httpx.Client, project: str, name: str = semconv.REVIEW_ANNOTATION_NAME
) -> None:
    """Put the config in the project's annotation panel (idempotent), so reviewers see it."""
    http.put(f"/v1/projects/{project}/annotation_configs/{name}").raise_for_status()


def poll_labels(
    http: httpx.Client,
    project: str,
    span_ids: Sequence[tuple[str, str]],
    name: str = semconv.REVIEW_ANNOTATION_NAME,
) -> list[Label]:
    """The HUMAN annotations named `name` on the given (trace id, span id) pairs."""
    traces = dict((span_id, trace_id) for trace_id, span_id in span_ids)
    ids = list(traces)
    labels: list[Label] = []
    for start in range(0, len(ids), BATCH):
        batch = ids[start : start + BATCH]
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {
                "span_ids": batch,
                "include_annotation_names": [name],
                "limit": 1000,
            }
            if cursor:
                params["cursor"] = cursor
            response = http.get(f"/v1/projects/{project}/span_annotations", params=params)
            response.raise_for_status()
            body = response.json()
            labels.extend(_labels(body.get("data", []), traces, name))
            cursor = body.get("next_cursor")
            if not cursor:
                break
    return labels


def _labels(items: Iterable[Any], traces: dict[str, str], name: str) -> Iterable[Label]:
    for item in items:
        if not isinstance(item, dict) or item.get("name") != name:
            continue
        if item.get("annotator_kind") != HUMAN:
            continue
        span_id = str(item.get("span_id", "")).lower()
        label = (item.get("result") or {}).get("label")
        if span_id not in traces or label not in semconv.REVIEW_LABELS:
            continue
        reviewer = item.get("user_id") or item.get("identifier") or ""
        metadata = item.get("metadata") or {}
        if isinstance(metadata, dict) and isinstance(metadata.get("reviewer"), str):
            reviewer = metadata["reviewer"]
        yield Label(traces[span_id], span_id, label, str(reviewer), _time(item))


def _time(item: dict[str, Any]) -> float:
    text = item.get("updated_at") or item.get("created_at")
    if not isinstance(text, str):
        return 0.0
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
