"""`tracefact collector`: the parts wired from a configuration, run until SIGTERM.

receivers ─▶ RequestQueue ─▶ Engine ─▶ Pipeline ─▶ WriteBack ─▶ Forwarder ─▶ upstreams
                              └── spans that are not evaluated ───────▶ Forwarder

`tracefact worker` is the same without receivers: it consumes a durable queue (Redis
stream or SQLite file) that collectors fill. A collector with `redis.consume: false`
only receives and stores.

A background loop that raises is restarted with backoff and counted (`Supervisor`); a
fault that cannot clear (the queue's file is not a queue) is reported on `/readyz`, and
the process drains and exits 1 `FATAL_GRACE_SECONDS` later.

Shutdown (SIGTERM or SIGINT), within `drain_seconds`: stop accepting (receivers
closed), route what the queue still holds and release the window, let evaluations
finish for the pipeline's `drain_seconds`, then flush upstream until the deadline; what
is still held then is counted and logged. What did not finish goes on with status
`shutdown` from a memory queue; a durable queue keeps its entry unacknowledged instead,
for another consumer (or this one restarted) to evaluate and forward.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from types import FrameType

from opentelemetry.sdk.resources import Resource

from tracefact import semconv
from tracefact._version import __version__
from tracefact.collector import logs
from tracefact.collector.backends import document_store, open_queue
from tracefact.collector.config import CollectorConfig, ConfigError
from tracefact.collector.engine import Engine
from tracefact.collector.forwarder import Forwarder
from tracefact.collector.http_receiver import HttpReceiver
from tracefact.collector.metrics import CollectorMetrics
from tracefact.collector.receivers import GrpcReceiver, Ingest, port_taken
from tracefact.collector.shared_documents import SharedDocumentStore
from tracefact.collector.supervisor import Supervisor
from tracefact.collector.writeback import Held, WriteBack
from tracefact.config import build_sinks
from tracefact.pipeline import Pipeline
from tracefact.pipeline.reading import SpanReader
from tracefact.prometheus import PrometheusMetrics

logger = logging.getLogger("tracefact.collector")

FATAL_GRACE_SECONDS = 5.0
"""After a fault that cannot clear, how long `/readyz` reports it before the process exits
(non-zero): a readiness probe's usual period."""


class Collector:
    """Every part, built from a configuration; `start` binds the ports."""

    def __init__(self, config: CollectorConfig, *, worker: bool = False) -> None:
        self.config = config
        self.worker = worker
        if worker and config.queue == "memory":
            raise ConfigError("queue: a worker needs a durable queue (sqlite or redis)")
        self.consumes = worker or config.redis is None or config.redis.consume
        evaluation = config.evaluation
        evaluators = (
            evaluation.build_evaluators("evaluation.evaluators") if evaluation.enabled else []
        )
        resource = Resource.create({"service.name": "tracefact-collector"})
        self.prometheus = PrometheusMetrics(resource)
        meter_provider = self.prometheus.meter_provider
        self.metrics = CollectorMetrics(meter_provider)
        self.supervisor = Supervisor(self.metrics)
        self.queue = open_queue(config)
        self.forwarder = Forwarder(config.upstreams, config.forwarding, self.metrics)
        self.writeback = WriteBack(self.forwarder)
        self.store = document_store(config)
        self.pipeline: Pipeline[Held] | None = None
        self.review = evaluation.review.monitor(meter_provider) if evaluation.enabled else None
        if evaluation.enabled:
            self.pipeline = Pipeline(
                self.writeback.apply,
                evaluators,
                evaluation.pipeline_options(),
                sampler=evaluation.sampler.build(),
                reader=SpanReader(store=self.store),
                sinks=build_sinks(evaluation.sinks, meter_provider),
                observers=[
                    evaluation.monitor.rate_monitor([e.name for e in evaluators], meter_provider),
                    *([self.review] if self.review is not None else []),
                ],
                receipt=self.writeback.receipt,
                meter_provider=meter_provider,
                review=evaluation.review.sampler(),
                bounded=True,  # the excess is sampled out before it is read, not dropped
            )
        self.engine = Engine(
            self.queue,
            self.forwarder,
            self.pipeline,
            self.writeback,
            evaluation.window_seconds,
            evaluation.window_max_spans,
            self.metrics,
            # Durable: spans wait in the queue, not in the pipeline (where they would be
            # dropped when it is full), and not past their maximum age.
            hold_in_queue=self.queue.durable,
            max_age_seconds=config.queue_max_age_seconds if self.queue.durable else None,
            max_deliveries=config.queue_max_deliveries if self.queue.durable else None,
            supervisor=self.supervisor,
            review=self.review.upstream if self.review is not None else None,
        )
        self.ingest = Ingest(
            config, self.queue, self.forwarder, self.metrics, fatal=lambda: self.supervisor.fatal
        )
        self.http = (
            HttpReceiver(self.ingest, self.prometheus.render)
            if config.receivers.http and not worker
            else None
        )
        self.grpc = GrpcReceiver(self.ingest) if config.receivers.grpc and not worker else None
        self.metrics.gauge(
            semconv.METRIC_COLLECTOR_QUEUE_DEPTH,
            "{request}",
            "requests not yet acknowledged",
            self.queue.depth,
        )
        self.metrics.gauge(
            semconv.METRIC_COLLECTOR_BUFFERED,
            "{span}",
            "spans held for forwarding",
            lambda: self.forwarder.spans,
        )
        self.metrics.gauge(
            semconv.METRIC_COLLECTOR_WAITING,
            "{span}",
            "LLM spans waiting in the window",
            lambda: self.engine.waiting,
        )

    def start(self) -> dict[str, int]:
        """Start every thread and server; the bound ports by name."""
        self.forwarder.start()
        if self.review is not None:
            self.review.start()
        if self.consumes:
            self.engine.start()
        ports: dict[str, int] = {}
        if self.http is not None:
            self.http.start()
            ports["http"] = self.http.port
        if self.grpc is not None:
            self.grpc.start()
            ports["grpc"] = self.grpc.port
        metrics = self.config.metrics
        if metrics.port is not None:
            try:
                ports["metrics"] = self.prometheus.serve(metrics.host, metrics.port)
            except OSError as exc:
                raise port_taken("metrics", metrics.host, metrics.port, exc.strerror) from None
        return ports

    def log_summary(self) -> None:
        """One line of what /metrics counts so far, for a person reading the logs."""
        counts = summary(self.prometheus.render())
        logger.info(
            "summary: %(received)d spans received, %(forwarded)d forwarded, %(evaluated)d "
            "evaluated, %(dropped)d dropped; %(queue_depth)d requests queued",
            counts,
            extra={"event": "summary", **counts},
        )

    def shutdown(self) -> None:
        """Stop accepting, finish what is held, flush upstream; all within the deadline."""
        deadline = time.monotonic() + self.config.drain_seconds
        self.ingest.stop(timeout=max(0.0, deadline - time.monotonic()))
        if self.grpc is not None:
            self.grpc.stop(grace_seconds=1.0)
        if self.http is not None:
            self.http.stop()
        if self.consumes:
            self.engine.stop(timeout=max(0.0, deadline - time.monotonic()))
            self.engine.drain()
        if self.pipeline is not None:
            self.pipeline.drain()  # evaluations get drain_seconds, then `shutdown`
            self.pipeline.shutdown_sinks()
        self.forwarder.close(deadline)
        if self.engine.kept:
            logger.warning(
                "entries left in the queue for another consumer",
                extra={"event": "requeued", "entries": self.engine.kept},
            )
        self.queue.close()
        if self.review is not None:
            self.review.shutdown()
        if isinstance(self.store, SharedDocumentStore):
            self.store.close()
        self.prometheus.shutdown()


def run(config: CollectorConfig, *, worker: bool = False) -> int:
    """Run until SIGTERM or SIGINT, then drain; 0 once drained."""
    logs.setup(config.logging.format, config.logging.level)
    collector = Collector(config, worker=worker)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    ports = collector.start()
    open_to = _beyond_loopback(config, worker)
    if open_to and config.auth.bearer_token is None:
        logger.warning(
            "listening beyond this machine without a token: anyone who reaches %s can send "
            "spans and read /metrics; set auth.bearer_token, or bind 127.0.0.1",
            ", ".join(open_to),
            extra={"event": "no_token", "addresses": open_to},
        )
    started = "consuming the queue" if worker else "listening"  # a worker has no receiver
    logger.info(
        started,
        extra={
            "event": "started" if worker else "listening",
            **ports,
            "version": __version__,
            "role": "worker" if worker else "collector",
            "queue": config.queue,
            "upstreams": Forwarder.describe(config.upstreams),
        },
    )
    every = config.logging.summary_seconds
    due = time.monotonic() + every
    while not stop.wait(min(1.0, every) if every else 1.0):
        if collector.supervisor.failed.is_set():  # `/readyz` reports it from now on
            stop.wait(FATAL_GRACE_SECONDS)  # long enough for a probe to see it
            break
        if every and time.monotonic() >= due:
            due = time.monotonic() + every
            collector.log_summary()
    logger.info("draining", extra={"event": "draining", "deadline_seconds": config.drain_seconds})
    collector.shutdown()
    fatal = collector.supervisor.fatal
    if fatal is not None:
        logger.critical("stopped: %s", fatal, extra={"event": "stopped", "error": fatal})
        return 1
    logger.info("stopped", extra={"event": "stopped"})
    return 0


LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _beyond_loopback(config: CollectorConfig, worker: bool) -> list[str]:
    """The configured addresses other machines may reach (a worker listens on none)."""
    if worker:
        return []
    receivers = config.receivers
    listening = [r for r in (receivers.http, receivers.grpc) if r is not None]
    addresses = [f"{r.host}:{r.port}" for r in listening if r.host not in LOOPBACK]
    metrics = config.metrics
    if metrics.port is not None and metrics.host not in LOOPBACK:
        addresses.append(f"{metrics.host}:{metrics.port}")
    return addresses


_SUMMARY = {
    "received": (semconv.METRIC_COLLECTOR_RECEIVED, None),
    "forwarded": (semconv.METRIC_COLLECTOR_FORWARDED, None),
    "evaluated": (semconv.METRIC_EVAL_SPANS, semconv.STATUS_OK),
    "dropped": (semconv.METRIC_EVAL_SPANS, semconv.STATUS_DROPPED),
    "queue_depth": (semconv.METRIC_COLLECTOR_QUEUE_DEPTH, None),
}
"""The summary's figures: a metric (and the `status` it is counted under) each."""


def summary(exposition: bytes) -> dict[str, int]:
    """The summary's figures, read from the Prometheus text /metrics serves."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(exposition.decode()):
        for sample in family.samples:
            if not sample.name.endswith(("_created", "_bucket", "_count", "_sum")):
                samples.setdefault(family.name, []).append((sample.labels, sample.value))
    counts = {}
    for key, (metric, status) in _SUMMARY.items():
        values = samples.get(metric.replace(".", "_"), [])
        counts[key] = int(sum(v for labels, v in values if status in (None, labels.get("status"))))
    return counts
