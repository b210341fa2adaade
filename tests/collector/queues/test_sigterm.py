"""SIGTERM mid-evaluation on durable queues: what is unfinished stays for another consumer.

A collector or worker told to stop while its LLM spans are still being evaluated (an
evaluator that waits a minute, `drain_seconds` 1) must not send them on with status
`shutdown` when its queue is durable: it leaves their entries unacknowledged and hands
them back, and the next consumer evaluates them (status ok) without waiting for a lease.
Their spans that already left arrive twice, within the count of
`tracefact.collector.spans.redelivered`. On the memory queue nothing
else would ever deliver them, so they go on with status `shutdown`, as before.
Run by `make test-queues` (collector subprocesses, a real Redis), not by `make test`.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.collector.harness import wait_until
from tests.collector.queues import processes
from tests.collector.queues.processes import (
    LLM_SPAN,
    arrivals,
    assert_evaluated_once,
    counter,
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

TRACES = 6
SLOW = 60.0
"""Seconds the first consumer's evaluator waits: far past its drain deadline."""


LEASE = 120
"""Seconds a lease lasts: longer than the tests wait, so only the hand-back on a drained
exit explains the next consumer getting the entries in time."""


def terminate_in_time(process: processes.CollectorProcess) -> None:
    """SIGTERM; the drained exit comes within `drain_seconds` (5) and a margin."""
    began = time.monotonic()
    assert process.terminate(timeout=30) == 0
    assert time.monotonic() - began < 5 + 3
    assert process.events("stopped"), process.lines[-5:]


def requeued(process: processes.CollectorProcess) -> int:
    return sum(int(e["entries"]) for e in process.events("requeued"))


def test_redis_worker_sigtermed_mid_evaluation_leaves_its_entries_to_another_worker(
    tmp_path: Path,
    upstream: OTLPReceiver,
    redis_server: RedisServer,
    started: list[processes.CollectorProcess],
) -> None:
    traces = range(1, TRACES + 1)
    receive_only = processes.config(
        upstream.endpoint, 0.01, **redis_keys(redis_server, False, lease_seconds=LEASE)
    )
    collector = start("collector", tmp_path / "c.yaml", receive_only)
    slow = start(
        "worker",
        tmp_path / "w1.yaml",
        processes.config(upstream.endpoint, SLOW, **redis_keys(redis_server, lease_seconds=LEASE)),
    )
    started += [collector, slow]
    # Per trace: the LLM span and its child in one entry, the retriever span in another.
    send(collector, (r for t in traces for r in trace_requests(t, together=False)))
    assert upstream.wait_for(2 * TRACES, timeout=20)  # children and retrievers left
    terminate_in_time(slow)
    assert llm_statuses(upstream) == {}  # nothing went on as `shutdown`
    assert requeued(slow) == TRACES  # each LLM entry, left unacknowledged

    fast = start(
        "worker",
        tmp_path / "w2.yaml",
        processes.config(upstream.endpoint, 0.01, **redis_keys(redis_server, lease_seconds=LEASE)),
    )
    started.append(fast)
    assert wait_until(lambda: set(arrivals(upstream)) == sent_ids(traces), timeout=30)
    assert wait_until(lambda: counter(fast, semconv.METRIC_COLLECTOR_REDELIVERED) >= 2 * TRACES)
    redelivered = counter(fast, semconv.METRIC_COLLECTOR_REDELIVERED)
    seen = arrivals(upstream)
    duplicates = sum(seen.values()) - len(seen)
    assert duplicates == TRACES  # the children, forwarded by the first worker already
    assert duplicates <= redelivered == 2 * TRACES
    assert_evaluated_once(upstream, traces)


def test_redis_worker_sigtermed_while_the_upstream_is_down_leaves_its_entries(
    tmp_path: Path,
    upstream: OTLPReceiver,
    redis_server: RedisServer,
    started: list[processes.CollectorProcess],
) -> None:
    """Evaluated, but the forwarding was cut off by the drain deadline: kept as well."""
    traces = range(1, TRACES + 1)
    upstream.fail_with = 503
    receive_only = processes.config(
        upstream.endpoint, 0.01, **redis_keys(redis_server, False, lease_seconds=LEASE)
    )
    collector = start("collector", tmp_path / "c.yaml", receive_only)
    worker = start(
        "worker",
        tmp_path / "w1.yaml",
        processes.config(upstream.endpoint, 0.01, **redis_keys(redis_server, lease_seconds=LEASE)),
    )
    started += [collector, worker]
    send(collector, (r for t in traces for r in trace_requests(t, together=True)))
    assert wait_until(lambda: upstream.refused >= 5, timeout=20)
    terminate_in_time(worker)
    assert requeued(worker) == TRACES
    failed = worker.events("upstream_failed")
    assert {f["reason"] for f in failed} == {semconv.UPSTREAM_SHUTDOWN}
    upstream.fail_with = None

    restarted = start(
        "worker",
        tmp_path / "w2.yaml",
        processes.config(upstream.endpoint, 0.01, **redis_keys(redis_server, lease_seconds=LEASE)),
    )
    started.append(restarted)
    assert wait_until(lambda: set(arrivals(upstream)) == sent_ids(traces), timeout=30)
    assert counter(restarted, semconv.METRIC_COLLECTOR_REDELIVERED) == 3 * TRACES
    assert sum(arrivals(upstream).values()) == 3 * TRACES  # none had arrived before
    assert_evaluated_once(upstream, traces)


def test_sqlite_collector_sigtermed_mid_evaluation_evaluates_them_after_restart(
    tmp_path: Path, upstream: OTLPReceiver, started: list[processes.CollectorProcess]
) -> None:
    traces = range(1, TRACES + 1)
    first = start(
        "collector",
        tmp_path / "a.yaml",
        processes.config(upstream.endpoint, SLOW, **sqlite_keys(tmp_path, lease_seconds=LEASE)),
    )
    started.append(first)
    send(first, (r for t in traces for r in trace_requests(t, together=True)))
    assert upstream.wait_for(2 * TRACES, timeout=20)  # the plain and retriever spans left
    terminate_in_time(first)
    assert llm_statuses(upstream) == {}
    assert requeued(first) == TRACES

    second = start(
        "collector",
        tmp_path / "b.yaml",
        processes.config(upstream.endpoint, 0.01, **sqlite_keys(tmp_path, lease_seconds=LEASE)),
    )
    started.append(second)
    assert wait_until(lambda: set(arrivals(upstream)) == sent_ids(traces), timeout=30)
    redelivered = counter(second, semconv.METRIC_COLLECTOR_REDELIVERED)
    assert redelivered == 3 * TRACES  # every span of each kept entry, possibly a duplicate
    seen = arrivals(upstream)
    assert sum(seen.values()) - len(seen) == 2 * TRACES  # the two that left before
    assert_evaluated_once(upstream, traces)


def test_memory_collector_sigtermed_mid_evaluation_sends_them_on_as_shutdown(
    tmp_path: Path, upstream: OTLPReceiver, started: list[processes.CollectorProcess]
) -> None:
    traces = range(1, TRACES + 1)
    collector = start("collector", tmp_path / "a.yaml", processes.config(upstream.endpoint, SLOW))
    started.append(collector)
    send(collector, (r for t in traces for r in trace_requests(t, together=True)))
    assert upstream.wait_for(2 * TRACES, timeout=20)
    terminate_in_time(collector)
    assert requeued(collector) == 0
    seen = arrivals(upstream)
    assert set(seen) == sent_ids(traces) and sum(seen.values()) == len(seen)
    for trace in traces:
        [status] = llm_statuses(upstream)[span_id(trace, LLM_SPAN)]
        assert status.startswith(f"{semconv.STATUS_SHUTDOWN}:")
