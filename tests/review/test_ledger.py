"""The ledger: selections and labels joined by span id, reviewers reduced to one label."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from tracefact.review import phoenix
from tracefact.review.estimate import Stratum
from tracefact.review.ledger import HOUR, Label, Ledger, Selection, parse_label

TRACE = "0" * 31 + "1"
F = Stratum("", "factual")


def span_id(i: int) -> str:
    return f"{i:016x}"


def fill(ledger: Ledger, count: int, time: float = 10 * HOUR) -> None:
    for i in range(count):
        ledger.add_selection(Selection(TRACE, span_id(i), "judge", F, 1.0, 1.0, True, time))


def only(ledger: Ledger, now: float | None = None) -> Any:
    (estimate,) = ledger.estimates(now)
    return estimate


def test_several_reviewers_by_majority_a_tie_is_pending() -> None:
    ledger = Ledger(min_labels=1)
    fill(ledger, 3)
    votes = {
        0: ["hallucinated", "hallucinated", "factual"],  # hallucinated
        1: ["hallucinated", "factual"],  # tie: pending
        2: ["unsure"],  # pending
    }
    for i, labels in votes.items():
        for n, label in enumerate(labels):
            ledger.add_label(Label(TRACE, span_id(i), label, f"r{n}", 1.0))
    estimate = only(ledger)
    assert (estimate.corrected.labels, estimate.corrected.pending) == (1, 2)
    assert estimate.corrected.rate == pytest.approx(1.0)
    # agreeing pairs: span 0 has 1 of 3, span 1 has 0 of 1
    assert estimate.agreement.spans == 2
    assert estimate.agreement.rate == pytest.approx(1 / 4)


def test_a_reviewers_latest_label_wins() -> None:
    ledger = Ledger(min_labels=1)
    fill(ledger, 1)
    ledger.add_label(Label(TRACE, span_id(0), "hallucinated", "ana", 2.0))
    ledger.add_label(Label(TRACE, span_id(0), "factual", "ana", 1.0))  # older: ignored
    assert only(ledger).corrected.rate == pytest.approx(1.0)


def test_a_label_counts_in_its_spans_window_however_late() -> None:
    ledger = Ledger(window_seconds=2 * HOUR, min_labels=1)
    fill(ledger, 2, time=1.5 * HOUR)
    ledger.add_selection(Selection(TRACE, span_id(9), "judge", F, 1.0, 1.0, True, 10 * HOUR))
    assert only(ledger, now=2 * HOUR).corrected.labels == 0
    ledger.add_label(Label(TRACE, span_id(0), "factual", "ana", 11 * HOUR))  # days later
    past = only(ledger, now=2 * HOUR).corrected
    assert (past.labels, past.pending) == (1, 1)
    assert only(ledger).corrected.labels == 0  # the newest window holds only span 9


def test_a_label_line_says_what_is_wrong() -> None:
    good = {"trace_id": TRACE, "span_id": span_id(1), "label": "factual"}
    assert parse_label(good).reviewer == ""
    for bad, reason in (
        ({**good, "label": "wrong"}, "label must be one of"),
        ({**good, "trace_id": "xyz"}, "trace_id must be 32 hex digits"),
        ({**good, "time": "noon"}, "time must be unix seconds"),
        ([], "not a JSON object"),
    ):
        with pytest.raises(ValueError, match=reason):
            parse_label(bad)


class FakePhoenix(BaseHTTPRequestHandler):
    """Phoenix's annotation config and span annotations endpoints, as far as tracefact uses."""

    annotations: ClassVar[list[dict[str, Any]]] = []
    configs: ClassVar[list[dict[str, Any]]] = []
    queries: ClassVar[list[dict[str, list[str]]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        taken = any(c["name"] == body["name"] for c in self.configs)
        if not taken:
            self.configs.append(body)
        self._reply(409 if taken else 200, {"data": body})

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        self.queries.append(query)
        assert url.path == "/v1/projects/default/span_annotations"
        wanted = set(query["span_ids"])
        found = [a for a in self.annotations if a["span_id"] in wanted]
        self._reply(200, {"data": found, "next_cursor": None})

    def _reply(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake_phoenix() -> Iterator[str]:
    FakePhoenix.annotations, FakePhoenix.configs, FakePhoenix.queries = [], [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakePhoenix)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def annotation(i: int, label: str, kind: str = "HUMAN", name: str = "tracefact.review") -> dict:
    return {
        "span_id": span_id(i),
        "name": name,
        "annotator_kind": kind,
        "result": {"label": label, "score": None, "explanation": None},
        "metadata": {"reviewer": "ana"},
        "updated_at": "2026-01-01T00:00:00+00:00",
    }


def test_human_annotations_are_polled_in_batches_of_selected_ids(fake_phoenix: str) -> None:
    FakePhoenix.annotations = [
        annotation(1, "hallucinated"),
        annotation(2, "factual", kind="LLM"),  # not a person
        annotation(3, "factual", name="other"),  # another annotation
        annotation(250, "factual"),
    ]
    ids = [(TRACE, span_id(i)) for i in range(1, 251)]
    with phoenix.client(fake_phoenix) as http:
        assert phoenix.ensure_annotation_config(http) is True
        assert phoenix.ensure_annotation_config(http) is False  # already there
        labels = phoenix.poll_labels(http, "default", ids)
    assert [(x.span_id, x.label, x.reviewer) for x in labels] == [
        (span_id(1), "hallucinated", "ana"),
        (span_id(250), "factual", "ana"),
    ]
    assert [len(q["span_ids"]) for q in FakePhoenix.queries] == [100, 100, 50]
    (config,) = FakePhoenix.configs
    assert config["type"] == "CATEGORICAL"
    assert [v["label"] for v in config["values"]] == ["hallucinated", "factual", "unsure"]
