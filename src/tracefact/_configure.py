"""`configure`, `force_flush` and `shutdown`: wiring tracefact into OpenTelemetry.

tracefact adds one span processor to the tracer provider (its own, or one the
application already set globally) and never replaces a provider. Calling
`configure` again swaps what sits behind that one processor.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, SynchronousMultiSpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)

from tracefact.config import (
    FILE_EXPORTER,
    GROUPS,
    SETTINGS,
    EvaluationOptions,
    ExportOptions,
    MonitorOptions,
    PrometheusOptions,
    Resolved,
    ReviewOptions,
    check_argument,
    exporter_list,
    resolve,
)
from tracefact.conventions import ReadOptions, SpanMapping, compile_mapping
from tracefact.conventions.documents import DocumentStore
from tracefact.evaluators.base import Evaluator
from tracefact.export import ExportProcessor, Unreachable
from tracefact.instrument.capture import CaptureOptions, Redactor, set_capture_options
from tracefact.instrument.pending import set_owner
from tracefact.pipeline import EvaluationProcessor, WrapperSpanProcessor
from tracefact.pipeline.options import Attach
from tracefact.pipeline.reading import SpanReader
from tracefact.prometheus import PrometheusMetrics
from tracefact.sampling import Sampler
from tracefact.scrubbing import ScrubbingOptions, set_scrubbing
from tracefact.sinks.base import ResultSink
from tracefact.spans_file import SpanFileExporter

logger = logging.getLogger("tracefact")


class _NoopProcessor(SpanProcessor):
    """What stands behind the switch when spans should go nowhere."""


class _SwitchProcessor(WrapperSpanProcessor):
    """The one processor tracefact adds to a provider; what it forwards to can be replaced.

    Its `on_start` and `on_end` are those of the processor behind it: a span costs the
    switch no call of its own.
    """

    def __init__(self, downstream: SpanProcessor) -> None:
        super().__init__(downstream)
        self._bind(downstream)

    def replace(self, new: SpanProcessor) -> SpanProcessor:
        old, self.downstream = self.downstream, new
        self._bind(new)
        return old

    def _bind(self, processor: SpanProcessor) -> None:
        self.on_start = processor.on_start  # type: ignore[method-assign]
        self.on_end = processor.on_end  # type: ignore[method-assign]


class _Installation:
    def __init__(self, provider: TracerProvider, switch: _SwitchProcessor) -> None:
        self.provider = provider
        self.switch = switch
        self.endpoint: PrometheusMetrics | None = None
        """The Prometheus endpoint `prometheus_port` asked for, if any."""


_lock = threading.Lock()  # configure/shutdown may be called from several threads
_installation: _Installation | None = None
_atexit_registered = False

ExporterSpec = str | SpanExporter


def configure(
    *,
    service_name: str | None = None,
    exporter: ExporterSpec | Sequence[ExporterSpec] | None = None,
    endpoint: str | None = None,
    headers: dict[str, str] | None = None,
    resource_attributes: dict[str, str] | None = None,
    export_queue_size: int | None = None,
    export_batch_size: int | None = None,
    export_delay_seconds: float | None = None,
    export_timeout_seconds: float | None = None,
    capture_content: bool | None = None,
    max_attribute_length: int | None = None,
    redact: Redactor | None = None,
    scrubbing: ScrubbingOptions | bool | None = None,
    evaluators: Sequence[Evaluator] | None = None,
    sampler: Sampler | None = None,
    attach: Attach | None = None,
    queue_size: int | None = None,
    concurrency: int | None = None,
    timeout_seconds: float | None = None,
    max_retries: int | None = None,
    max_hold_seconds: float | None = None,
    drain_seconds: float | None = None,
    api_base: str | None = None,
    sample_rate: float | None = None,
    documents_max_bytes: int | None = None,
    documents_max_traces: int | None = None,
    documents_max_documents: int | None = None,
    documents_max_age_seconds: float | None = None,
    sinks: Sequence[ResultSink] = (),
    span_mapping: SpanMapping | None = None,
    contexts_from_prompt: bool = False,
    exclude_tools: Sequence[str] = (),
    monitor_group_by: Sequence[str] | str | None = None,
    monitor_max_groups: int | None = None,
    monitor_window_seconds: float | None = None,
    prometheus_port: int | None = None,
    prometheus_host: str | None = None,
    review_probabilities: dict[str, float] | None = None,
    review_labels_per_day: float | None = None,
    review_group_by: Sequence[str] | str | None = None,
    review_window_seconds: float | None = None,
    review_min_labels: int | None = None,
    review_min_share: float | None = None,
    review_target_half_width: float | None = None,
    review_initial_probability: float | None = None,
    review_annotation_name: str | None = None,
    review_double_share: float | None = None,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    export: ExportOptions | None = None,
    capture: CaptureOptions | None = None,
    evaluation: EvaluationOptions | None = None,
    monitor: MonitorOptions | None = None,
    prometheus: PrometheusOptions | None = None,
    review: ReviewOptions | None = None,
) -> TracerProvider:
    """Set tracefact up; arguments left out come from `TRACEFACT_*` variables, then defaults.

    exporter: "otlp" (OTLP/HTTP protobuf, honouring OTEL_EXPORTER_OTLP_*), "console",
    "none", "file:PATH" (OTLP/JSON lines appended to PATH, what `tracefact report` and
    `tracefact monitor` read), any SpanExporter, or a list of these. With an SDK tracer
    provider already set globally (or one passed as `tracer_provider`, which becomes the
    global one if none is set), tracefact adds its processor to it instead of creating
    one. Safe to call again: the new settings replace the old ones.

    evaluators: what judges sampled LLM spans; default the offline evaluator, ``[]``
    to only trace. sampler: which spans are judged; default ``Ratio(sample_rate)``.
    export_queue_size / export_batch_size / export_delay_seconds: the export stage's
    queue (spans past it are counted in ``tracefact.export.dropped``), batch and delay;
    export_timeout_seconds: an OTLP export's deadline and how long shutdown drains.
    sinks: where results go besides the span's attributes, e.g.
    ``[tracefact.sinks.PhoenixAnnotations("http://127.0.0.1:6006")]``.
    scrubbing: secrets are replaced in everything tracefact records (default on);
    ``ScrubbingOptions(extra_patterns=[...], allow_keys=[...])`` tunes it, ``False``
    turns it off.
    span_mapping: where to find question, answer and contexts on LLM spans no
    convention covers: a function of the span's attributes returning a dict with any of
    "question", "answer", "contexts", or a dict of paths such as
    ``{"contexts": "app.request#documents.*.text"}`` (see `tracefact.conventions.mapping`).
    contexts_from_prompt: when nothing else grounds an LLM span, judge it against its
    prompt's system and other non-question messages (off: instructions are not evidence).
    exclude_tools: names of tools whose results are not evidence (one that only echoes
    its input, a clock); the results of every other tool are (see docs/agents.md).
    monitor_group_by / monitor_max_groups / monitor_window_seconds: the live hallucination
    rate (`tracefact.monitor`) is kept per evaluator and per group of these attributes
    (model, service, route, prompt_version or any attribute name; default service and
    model), for at most that many groups, over that sliding window.
    prometheus_port: serve tracefact's metrics (the rate's counters and gauges, the
    pipeline's) for Prometheus at ``http://prometheus_host:port/metrics`` (host default
    127.0.0.1; needs the ``prometheus`` extra); not with `meter_provider`.
    review_*: human review of a random sample of evaluated spans (`ReviewOptions`, see
    docs/review.md): ``review_probabilities`` per stratum or ``review_labels_per_day``
    turn it on; each evaluated span then carries ``tracefact.review.*``.
    drain_seconds: how long shutdown lets running evaluations finish; api_base: where
    judges named in TRACEFACT_EVALUATORS send their calls; sample_rate: the share of
    traces judged when no `sampler` is given; documents_max_*: the bounds of the
    per-trace store of retrieved documents.

    Every setting is declared once in `tracefact.config`'s table, and can also be given
    grouped, as `scrubbing=` is: ``export=ExportOptions(...)``, ``capture=...``,
    ``evaluation=EvaluationOptions(...)``, ``monitor=...``, ``prometheus=...``; a flat
    keyword wins over its group's field, which wins over ``TRACEFACT_*``. The other
    options build the pipeline's `PipelineOptions`. A wrong argument raises TypeError or
    ValueError naming it.
    """
    global _installation, _atexit_registered
    arguments = dict(locals())  # every argument by name: checked, then read by name
    groups = {name: arguments.pop(name) for name in GROUPS}
    for name, value in arguments.items():
        if value is not None and SETTINGS[name].path is None:
            check_argument(name, value)  # objects only configure() takes
    settings = resolve(arguments, groups, os.environ)
    if settings.prometheus.port is not None and meter_provider is not None:
        raise ValueError(
            "configure(prometheus_port=...) serves metrics of its own meter provider: "
            "leave meter_provider out, or serve that provider's metrics yourself"
        )
    scraped = None
    if settings.prometheus.port is not None:
        scraped = PrometheusMetrics(resource=_resource(settings.export))
        meter_provider = scraped.meter_provider
    set_scrubbing(scrubbing)
    set_capture_options(settings.capture)
    objects = [e for e in exporter_list(exporter or ()) if isinstance(e, SpanExporter)]
    processor = _export_processor(objects, settings.export, meter_provider)
    if evaluators is None:
        evaluators = settings.evaluation.build_evaluators("TRACEFACT_EVALUATORS")
    if evaluators:
        processor = _evaluation_processor(
            processor,
            evaluators,
            settings,
            sampler,
            sinks,
            meter_provider,
            ReadOptions(
                mapping=compile_mapping(span_mapping) if span_mapping is not None else None,
                contexts_from_prompt=contexts_from_prompt,
                exclude_tools=frozenset(exclude_tools),
            ),
        )
    with _lock:
        provider = tracer_provider or _global_sdk_provider() or _new_provider(settings.export)
        if _global_sdk_provider() is None:
            trace.set_tracer_provider(provider)  # decorators trace through the global one
        if _installation is not None and _installation.provider is provider:
            old = _installation.switch.replace(processor)
        else:
            old = _NoopProcessor()
            if _installation is not None:  # moving to another provider: the old one goes quiet
                old = _installation.switch.replace(old)
            switch = _SwitchProcessor(processor)
            provider.add_span_processor(switch)
            _installation = _Installation(provider, switch)
        switch = _installation.switch
        set_owner(provider, switch if _finishes_content(processor) else None)
        old_endpoint, _installation.endpoint = _installation.endpoint, scraped
        if not _atexit_registered:
            _register_exit_hook(shutdown)
            _atexit_registered = True
    old.shutdown()  # outside the lock: draining may take a while
    if old_endpoint is not None:
        old_endpoint.shutdown()  # frees its port before a new endpoint takes it
    if scraped is not None:
        _serve(scraped, settings.prometheus)
    return provider


def _finishes_content(processor: SpanProcessor) -> bool:
    """Whether every span `processor` hands on has its pending content finished first.

    tracefact's own stages do (`instrument.pending`); anything else, a console exporter
    included, gets content finished as it is recorded.
    """
    if isinstance(processor, (ExportProcessor, _NoopProcessor)):
        return True
    if isinstance(processor, EvaluationProcessor):
        return _finishes_content(processor.downstream)
    if isinstance(processor, SynchronousMultiSpanProcessor):
        return all(_finishes_content(p) for p in processor._span_processors)
    return False


def _evaluation_processor(
    downstream: SpanProcessor,
    evaluators: Sequence[Evaluator],
    settings: Resolved,
    sampler: Sampler | None,
    sinks: Sequence[ResultSink],
    meter_provider: MeterProvider | None,
    read_options: ReadOptions,
) -> SpanProcessor:
    evaluation = settings.evaluation
    monitor = settings.monitor.rate_monitor([e.name for e in evaluators], meter_provider)
    return EvaluationProcessor(
        downstream,
        evaluators,
        evaluation.pipeline_options(),
        sampler=sampler or evaluation.sampler.build(),
        sinks=sinks,
        observers=[monitor],
        meter_provider=meter_provider,
        reader=SpanReader(read_options, store=DocumentStore(**evaluation.documents.model_dump())),
        review=settings.review.sampler(),
    )


def _serve(endpoint: PrometheusMetrics, settings: PrometheusOptions) -> None:
    host, port = settings.host, settings.port or 0
    try:
        port = endpoint.serve(host, port)
    except OSError as exc:
        raise ValueError(f"configure(prometheus_port={port}): cannot serve there: {exc}") from exc
    logger.info("tracefact: Prometheus metrics on http://%s:%d/metrics", host, port)


def _register_exit_hook(hook: Callable[[], object]) -> None:
    """Run `hook` at exit before concurrent.futures refuses new work.

    A span ended just before the script exits is evaluated in the drain; the local model
    runs in an executor, which plain `atexit` hooks are too late to use (its own hook,
    run first, makes every submit fail). CPython's threading exit hooks run earlier, in
    reverse order of registration, so ours runs before the executor's.
    """
    register = getattr(threading, "_register_atexit", None)
    try:
        if register is None:
            raise RuntimeError("no threading exit hooks")
        register(hook)
    except RuntimeError:  # another interpreter, or already shutting down
        atexit.register(hook)


def force_flush(timeout_millis: int = 30000) -> bool:
    """Export everything tracefact holds; False if the timeout passed first."""
    installation = _installation
    return True if installation is None else installation.switch.force_flush(timeout_millis)


def shutdown() -> None:
    """Flush and stop tracefact's processor; spans after this go nowhere. Idempotent."""
    installation = _installation
    if installation is not None:
        installation.switch.replace(_NoopProcessor()).shutdown()
        endpoint, installation.endpoint = installation.endpoint, None
        if endpoint is not None:
            endpoint.shutdown()


def _global_sdk_provider() -> TracerProvider | None:
    provider = trace.get_tracer_provider()
    return provider if isinstance(provider, TracerProvider) else None


def _new_provider(settings: ExportOptions) -> TracerProvider:
    return TracerProvider(resource=_resource(settings))


def _resource(settings: ExportOptions) -> Resource:
    attributes: dict[str, Any] = dict(settings.resource_attributes)
    if settings.service_name:
        attributes[SERVICE_NAME] = settings.service_name
    return Resource.create(attributes)


def _export_processor(
    exporters: list[SpanExporter], settings: ExportOptions, meter_provider: MeterProvider | None
) -> SpanProcessor:
    """One processor per exporter (console prints at once, the others batch)."""

    def batched(exporter: SpanExporter) -> SpanProcessor:
        return ExportProcessor(
            exporter,
            max_queue_size=settings.queue_size,
            max_batch_size=settings.batch_size,
            schedule_delay_seconds=settings.delay_seconds,
            drain_seconds=settings.timeout_seconds,
            meter_provider=meter_provider,
        )

    processors = [batched(e) for e in exporters]
    for name in (n.strip() for n in settings.exporter.split(",")):
        if name == "console":
            processors.append(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stdout)))
        elif name == "otlp":
            endpoint = otlp_endpoint(settings.endpoint)
            otlp = OTLPSpanExporter(
                endpoint=endpoint, headers=settings.headers, timeout=settings.timeout_seconds
            )
            processors.append(batched(Unreachable(otlp, endpoint)))
        elif name.startswith(FILE_EXPORTER):
            processors.append(batched(SpanFileExporter(name[len(FILE_EXPORTER) :].strip())))
    if not processors:
        return _NoopProcessor()
    if len(processors) == 1:
        return processors[0]
    fan_out = SynchronousMultiSpanProcessor()  # type: ignore[no-untyped-call]
    for processor in processors:
        fan_out.add_span_processor(processor)
    return fan_out


def otlp_endpoint(endpoint: str | None, environ: Mapping[str, str] = os.environ) -> str:
    """Where OTLP spans go: the setting, else OTEL_EXPORTER_OTLP_*, else localhost:4318."""
    traces = traces_endpoint(endpoint) or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if traces:
        return traces
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4318"
    return base.rstrip("/") + "/v1/traces"


def traces_endpoint(endpoint: str | None) -> str | None:
    """Accept a base URL (``http://host:4318``) as well as the full ``.../v1/traces``."""
    if endpoint is None:
        return None
    if urlsplit(endpoint).path.rstrip("/") in ("", "/"):
        return endpoint.rstrip("/") + "/v1/traces"
    return endpoint
