"""What every HTTP sink guarantees the pipeline: bounded memory, bounded waits, counts."""

from __future__ import annotations

import threading
from typing import Any

from opentelemetry import context as otel_context

from tests.fakes.json_api import Scripted
from tests.fakes.phoenix_server import fake_phoenix
from tests.sinks.conftest import SinkCounts
from tests.sinks.helpers import FAST, evaluated
from tracefact.sinks import PhoenixAnnotations, ResultSink

SINK = "phoenix-annotations"


def test_sinks_follow_the_protocol() -> None:
    assert isinstance(PhoenixAnnotations(), ResultSink)


def test_a_full_queue_drops_and_counts_instead_of_waiting(sink_counts: SinkCounts) -> None:
    with fake_phoenix() as phoenix:
        sink = PhoenixAnnotations(
            phoenix.base_url,
            queue_size=2,
            schedule_delay_seconds=60,
            meter_provider=sink_counts.provider,
        )
        # No batch is due for a minute, so nothing makes room: a submit that waited for
        # room would never return (the join's bound only keeps a broken build from hanging).
        submitting = threading.Thread(target=lambda: [sink.submit(evaluated()) for _ in range(5)])
        submitting.start()
        submitting.join(20)
        assert not submitting.is_alive()
        assert sink.force_flush(5000)
        sink.shutdown()
    assert len(phoenix.annotations) == 2
    assert sink_counts() == {(SINK, "delivered"): 2, (SINK, "dropped"): 3}


def test_flush_and_shutdown_give_up_on_a_hanging_backend(sink_counts: SinkCounts) -> None:
    with fake_phoenix() as phoenix:
        phoenix.api.script = [Scripted(200, delay=600)]  # parked until the server closes
        sink = PhoenixAnnotations(
            phoenix.base_url,
            timeout_seconds=600,
            max_retries=0,
            drain_seconds=0.1,
            meter_provider=sink_counts.provider,
            **FAST,
        )
        sink.submit(evaluated())
        assert not sink.force_flush(100)
        # The backend answers only when the server closes, after this block: a shutdown that
        # waited for it would never return (the join's bound is a hang guard, not a timing).
        closing = threading.Thread(target=sink.shutdown)
        closing.start()
        closing.join(20)
        assert not closing.is_alive()
        sink.submit(evaluated())  # after shutdown: counted, not queued
    assert phoenix.annotations == []
    assert sink_counts() == {(SINK, "failed"): 1, (SINK, "dropped"): 1}


def test_sink_requests_run_with_instrumentation_suppressed() -> None:
    """An app that instruments httpx must not get a span for each of the sink's requests.

    Instrumentations skip calls made while OpenTelemetry's suppression key is set.
    """
    seen: list[bool] = []

    class Recording(PhoenixAnnotations):
        def deliveries(self, client: Any, batch: Any) -> Any:
            seen.append(bool(otel_context.get_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY)))
            return super().deliveries(client, batch)

    with fake_phoenix() as phoenix:
        sink = Recording(phoenix.base_url, **FAST)
        sink.submit(evaluated())
        assert sink.force_flush(5000)
        sink.shutdown()
    assert seen == [True]
    assert len(phoenix.annotations) == 1
