"""kill -9 collectors and workers on durable queues: nothing acknowledged is lost.

Every request the collector answered 200 must reach the upstream after a crash and a
restart; a span that arrives twice must be one the restarted process counted as
possibly duplicated (`tracefact.collector.spans.redelivered`). Run by `make test-queues`
(collector subprocesses, a real Redis), not by `make test`.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.collector.harness import attributes, wait_until
from tests.collector.queues import processes
from tests.collector.queues.processes import (
    LLM_SPAN,
    SPANS_PER_TRACE,
    arrivals,
    assert_evaluated_once,
    counter,
    gauge,
    kill,
    llm_statuses,
    redis_keys,
    send,
    sent_ids,
    span_id,
    sqlite_keys,
    start,
    trace_requests,
)
from tests.collector.queues.redis_server import RedisServer
from tests.fakes.otlp import OTLPReceiver
from tracefact import semconv

TRACES = 8
REDELIVERED = semconv.METRIC_COLLECTOR_REDELIVERED
BUFFERED = semconv.METRIC_COLLECTOR_BUFFERED


def assert_all_arrived_once_or_counted(
    upstream: OTLPReceiver, traces: range, counted_duplicates: float
) -> int:
    """Every sent span arrived; the extra arrivals are within the counted duplicates."""
    seen = arrivals(upstream)
    assert set(seen) == sent_ids(traces)
    duplicates = sum(seen.values()) - len(seen)
    assert duplicates <= counted_duplicates
    return duplicates


def assert_llm_spans_evaluated_with_their_documents(upstream: OTLPReceiver, traces: range) -> None:
    statuses = llm_statuses(upstream)
    for trace in traces:
        assert set(statuses[span_id(trace, LLM_SPAN)]) == {"ok: 1 contexts"}, trace


@pytest.mark.parametrize("together", [True, False], ids=["one-request", "two-requests"])
def test_sqlite_collector_killed_mid_evaluation_forwards_everything_after_restart(
    tmp_path: Path,
    upstream: OTLPReceiver,
    started: list[processes.CollectorProcess],
    together: bool,
) -> None:
    """Two requests: the retriever's left before the kill; its documents stayed in the file."""
    traces = range(1, TRACES + 1)
    first = start(
        "collector",
        tmp_path / "a.yaml",
        processes.config(upstream.endpoint, 60, **sqlite_keys(tmp_path)),
    )
    started.append(first)
    send(first, (r for t in traces for r in trace_requests(t, together=together)))
    # The plain and retriever spans left; the LLM spans are being evaluated (for a minute).
    assert upstream.wait_for(2 * TRACES, timeout=20)
    kill(first)

    second = start(
        "collector",
        tmp_path / "b.yaml",
        processes.config(upstream.endpoint, 0.01, **sqlite_keys(tmp_path)),
    )
    started.append(second)
    assert wait_until(lambda: set(arrivals(upstream)) == sent_ids(traces), timeout=30)
    redelivered = counter(second, REDELIVERED)
    # Every request holding an LLM span, and any other forwarded but not yet acknowledged.
    waiting = SPANS_PER_TRACE if together else 2
    assert redelivered >= TRACES * waiting
    duplicates = assert_all_arrived_once_or_counted(upstream, traces, redelivered)
    assert duplicates >= TRACES * (waiting - 1)  # the spans that left before the kill, again
    assert_llm_spans_evaluated_with_their_documents(upstream, traces)


def test_sqlite_collector_killed_mid_forwarding_forwards_everything_after_restart(
    tmp_path: Path, upstream: OTLPReceiver, started: list[processes.CollectorProcess]
) -> None:
    traces = range(1, TRACES + 1)
    upstream.fail_with = 503
    first = start(
        "collector",
        tmp_path / "a.yaml",
        processes.config(upstream.endpoint, 0.01, **sqlite_keys(tmp_path)),
    )
    started.append(first)
    send(first, (r for t in traces for r in trace_requests(t, together=True)))
    # Evaluated and being forwarded: every span is in the forwarding buffer, the upstream
    # refuses, the collector retries.
    everything = TRACES * SPANS_PER_TRACE
    assert wait_until(lambda: gauge(first, BUFFERED) == everything, timeout=20)
    assert wait_until(lambda: upstream.refused >= 5, timeout=20)
    kill(first)
    upstream.fail_with = None

    second = start(
        "collector",
        tmp_path / "b.yaml",
        processes.config(upstream.endpoint, 0.01, **sqlite_keys(tmp_path)),
    )
    started.append(second)
    assert wait_until(lambda: set(arrivals(upstream)) == sent_ids(traces), timeout=30)
    redelivered = counter(second, REDELIVERED)
    assert redelivered == TRACES * SPANS_PER_TRACE
    assert assert_all_arrived_once_or_counted(upstream, traces, redelivered) == 0
    assert_llm_spans_evaluated_with_their_documents(upstream, traces)


def test_redis_worker_killed_mid_evaluation_another_worker_takes_over(
    tmp_path: Path,
    upstream: OTLPReceiver,
    redis_server: RedisServer,
    started: list[processes.CollectorProcess],
) -> None:
    traces = range(1, TRACES + 1)
    receive_only = processes.config(upstream.endpoint, 0.01, **redis_keys(redis_server, False))
    collector = start("collector", tmp_path / "c.yaml", receive_only)
    slow = start(
        "worker",
        tmp_path / "w1.yaml",
        processes.config(upstream.endpoint, 60, **redis_keys(redis_server)),
    )
    started += [collector, slow]
    # The LLM span's request first, its retriever span's second: they meet through Redis.
    send(collector, (r for t in traces for r in trace_requests(t, together=False)))
    assert upstream.wait_for(2 * TRACES, timeout=20)  # all but the LLM spans, in evaluation
    kill(slow)

    fast = start(
        "worker",
        tmp_path / "w2.yaml",
        processes.config(upstream.endpoint, 0.01, **redis_keys(redis_server)),
    )
    started.append(fast)
    assert wait_until(lambda: set(arrivals(upstream)) == sent_ids(traces), timeout=30)
    redelivered = counter(fast, REDELIVERED)
    # Each LLM request (the LLM span and its child), and any retriever request forwarded
    # but not yet acknowledged at the kill.
    assert redelivered >= TRACES * 2
    duplicates = assert_all_arrived_once_or_counted(upstream, traces, redelivered)
    assert duplicates >= TRACES  # the children, forwarded before the kill
    assert_llm_spans_evaluated_with_their_documents(upstream, traces)


def test_redis_worker_and_collector_killed_mid_forwarding_lose_nothing(
    tmp_path: Path,
    upstream: OTLPReceiver,
    redis_server: RedisServer,
    started: list[processes.CollectorProcess],
) -> None:
    traces = range(1, TRACES + 1)
    upstream.fail_with = 503
    receive_only = processes.config(upstream.endpoint, 0.01, **redis_keys(redis_server, False))
    collector = start("collector", tmp_path / "c.yaml", receive_only)
    worker = start(
        "worker",
        tmp_path / "w1.yaml",
        processes.config(upstream.endpoint, 0.01, **redis_keys(redis_server)),
    )
    started += [collector, worker]
    send(collector, (r for t in traces for r in trace_requests(t, together=False)))
    assert wait_until(lambda: upstream.refused >= 5, timeout=20)
    kill(collector)  # it held nothing once it answered 200: the requests are in Redis
    kill(worker)
    upstream.fail_with = None

    restarted = start(
        "worker",
        tmp_path / "w2.yaml",
        processes.config(upstream.endpoint, 0.01, **redis_keys(redis_server)),
    )
    started.append(restarted)
    assert wait_until(lambda: set(arrivals(upstream)) == sent_ids(traces), timeout=30)
    redelivered = counter(restarted, REDELIVERED)
    assert redelivered == TRACES * SPANS_PER_TRACE
    assert assert_all_arrived_once_or_counted(upstream, traces, redelivered) == 0
    assert_llm_spans_evaluated_with_their_documents(upstream, traces)


def test_two_collectors_and_two_workers_deliver_every_span_once(
    tmp_path: Path,
    upstream: OTLPReceiver,
    redis_server: RedisServer,
    started: list[processes.CollectorProcess],
) -> None:
    traces = range(1, 4 * TRACES + 1)
    receive_only = processes.config(upstream.endpoint, 0.01, **redis_keys(redis_server, False))
    collectors = [start("collector", tmp_path / f"c{i}.yaml", receive_only) for i in (1, 2)]
    # Each worker evaluates 4 LLM spans at a time and holds at most 16 in its window: the
    # rest wait in Redis for either. The senders drift apart: a window of 3 s covers it.
    # Nobody dies here: a claim time no busy machine reaches, so nothing is taken twice.
    queue = redis_keys(redis_server, lease_seconds=60)
    settings = processes.config(upstream.endpoint, 0.2, queue_size=4, window_seconds=3, **queue)
    settings["evaluation"]["window_max_spans"] = 16
    workers = [start("worker", tmp_path / f"w{i}.yaml", settings) for i in (1, 2)]
    started += collectors + workers
    # Each collector gets every other trace's LLM request and the other's retriever request.
    senders = [
        threading.Thread(
            target=send,
            args=(collector, [trace_requests(t, together=False)[(t + i) % 2] for t in traces]),
        )
        for i, collector in enumerate(collectors)
    ]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(60)

    assert wait_until(lambda: set(arrivals(upstream)) == sent_ids(traces), timeout=60)
    redelivered = sum(counter(worker, REDELIVERED) for worker in workers)
    assert assert_all_arrived_once_or_counted(upstream, traces, redelivered) == 0
    assert_llm_spans_evaluated_with_their_documents(upstream, traces)
    forwarded = [counter(worker, semconv.METRIC_COLLECTOR_FORWARDED) for worker in workers]
    assert sum(forwarded) == len(sent_ids(traces))
    assert min(forwarded) > 0  # both workers had a share


def test_llm_spans_older_than_the_maximum_age_go_on_unevaluated_as_timeout(
    tmp_path: Path,
    upstream: OTLPReceiver,
    redis_server: RedisServer,
    started: list[processes.CollectorProcess],
) -> None:
    traces = range(1, TRACES + 1)
    receive_only = processes.config(upstream.endpoint, 0.01, **redis_keys(redis_server, False))
    collector = start("collector", tmp_path / "c.yaml", receive_only)
    started.append(collector)
    send(collector, (r for t in traces for r in trace_requests(t, together=True)))
    time.sleep(1.5)  # no worker yet: the requests age in Redis

    late = processes.config(upstream.endpoint, 0.01, **redis_keys(redis_server))
    worker = start("worker", tmp_path / "w.yaml", {**late, "queue_max_age_seconds": 1})
    started.append(worker)
    assert wait_until(lambda: set(arrivals(upstream)) == sent_ids(traces), timeout=30)
    assert counter(worker, semconv.METRIC_COLLECTOR_EXPIRED) == TRACES
    for _, span in upstream.spans():
        values = attributes(span)
        if span.span_id in {span_id(t, LLM_SPAN) for t in traces}:
            assert values[semconv.EVAL_STATUS] == semconv.STATUS_TIMEOUT
            assert values[semconv.EVAL_ERROR] == semconv.QUEUE_AGE_ERROR
        else:
            assert semconv.EVAL_STATUS not in values  # passed through as received


def test_a_request_every_consumer_died_with_goes_on_unevaluated(
    tmp_path: Path, upstream: OTLPReceiver, started: list[processes.CollectorProcess]
) -> None:
    traces = range(1, 3)
    settings = processes.config(upstream.endpoint, 60, **sqlite_keys(tmp_path))
    first = start("collector", tmp_path / "a.yaml", {**settings, "queue_max_deliveries": 1})
    started.append(first)
    send(first, (r for t in traces for r in trace_requests(t, together=True)))
    assert upstream.wait_for(2 * len(traces), timeout=20)
    kill(first)  # the consumer died with the requests: their second delivery is the last

    second = start("collector", tmp_path / "b.yaml", {**settings, "queue_max_deliveries": 1})
    started.append(second)
    assert wait_until(lambda: set(arrivals(upstream)) == sent_ids(traces), timeout=30)
    assert counter(second, semconv.METRIC_COLLECTOR_EXPIRED) == len(traces)
    for trace in traces:
        [llm] = [s for _, s in upstream.spans() if s.span_id == span_id(trace, LLM_SPAN)]
        values = attributes(llm)
        assert values[semconv.EVAL_STATUS] == semconv.STATUS_ERROR
        assert values[semconv.EVAL_ERROR] == semconv.QUEUE_DELIVERIES_ERROR


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_slow_consumer_never_takes_its_own_entries_back(
    tmp_path: Path,
    upstream: OTLPReceiver,
    request: pytest.FixtureRequest,
    started: list[processes.CollectorProcess],
    backend: str,
) -> None:
    """Past the stall time (three 1 s leases) it stops renewing, for others to take over.

    Taking them back itself evaluated and forwarded every span again, counted toward
    `queue_max_deliveries`.
    """
    keys = (
        sqlite_keys(tmp_path)
        if backend == "sqlite"
        else redis_keys(request.getfixturevalue("redis_server"))
    )
    collector = start(
        "collector", tmp_path / "c.yaml", processes.config(upstream.endpoint, 6, **keys)
    )
    started.append(collector)
    send(collector, trace_requests(1, together=True))
    assert wait_until(lambda: set(arrivals(upstream)) == sent_ids(range(1, 2)), timeout=30)
    time.sleep(2)  # what a second delivery would have sent meanwhile
    assert sorted(arrivals(upstream).values()) == [1] * SPANS_PER_TRACE
    assert counter(collector, REDELIVERED) == 0
    assert_evaluated_once(upstream, range(1, 2))
