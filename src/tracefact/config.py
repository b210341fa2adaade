"""tracefact's one table of settings, read by `configure()`, `TRACEFACT_*` and the collector.

As logfire's `config_params`: each setting is declared once, with its type, default and
bounds, in one of the option groups below (export, capture, evaluation with its sampler
and document store, monitor, prometheus, review), and once in `SETTINGS`, which names it for
each way to set it:
- `configure(queue_size=8)`: the flat keyword (`SETTINGS`' name), or the group object
  (`configure(evaluation=EvaluationOptions(queue_size=8))`), as `scrubbing=` takes its;
- `TRACEFACT_QUEUE_SIZE=8`: the same name in capitals, read where neither was given;
- the collector's YAML: the groups themselves (`evaluation:` is `EvaluationOptions` plus
  the collector's own keys, `evaluation.monitor:` is `MonitorOptions`).
A wrong value fails where it was given, naming it as it was spelt there:
`configure(queue_size=...)`, `TRACEFACT_QUEUE_SIZE=...` or `evaluation.queue_size`.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    InstanceOf,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from tracefact.errors import ConfigurationError
from tracefact.evaluators.base import Evaluator
from tracefact.evaluators.registry import build_evaluators
from tracefact.instrument.capture import CaptureOptions
from tracefact.monitor import live
from tracefact.pipeline.options import PipelineOptions
from tracefact.review.design import ReviewSampler
from tracefact.sampling import Always, Budget, RateLimit, Ratio, Rule, Sampler
from tracefact.scrubbing import ScrubbingOptions, check_scrubbing
from tracefact.sinks.base import ResultSink

EXPORTER_NAMES = ("otlp", "console", "none", "file:PATH")
FILE_EXPORTER = "file:"
"""``file:spans.jsonl``: append OTLP/JSON lines to that file (`tracefact.spans_file`)."""


def exporter_name_error(name: str) -> str | None:
    """Why `name` is not an exporter's name, or None when it is one."""
    if name.startswith(FILE_EXPORTER):
        return None if name[len(FILE_EXPORTER) :].strip() else "file: needs a path (file:PATH)"
    if name in EXPORTER_NAMES:
        return None
    return f"{name!r} is not among {EXPORTER_NAMES}"


def _exporter_names(value: str) -> str:
    for name in value.split(","):
        error = exporter_name_error(name.strip())
        if error is not None:
            raise ValueError(error)
    return value


ExporterNames = Annotated[str, AfterValidator(_exporter_names)]


class _Group(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- the groups ------------------------------------------------------------------------------
class ExportOptions(_Group):
    """Where spans go, and the export stage's queue (`configure(export=...)`)."""

    service_name: str | None = None
    """service.name; OTEL_SERVICE_NAME is honoured when unset."""
    exporter: ExporterNames = "otlp"
    """Comma-separated: otlp, console, none, file:PATH (configure() also takes SpanExporters)."""
    endpoint: str | None = None
    """OTLP/HTTP endpoint (base or .../v1/traces); else OTEL_EXPORTER_OTLP_*."""
    headers: dict[str, str] | None = None
    resource_attributes: dict[str, str] = Field(default_factory=dict)
    queue_size: int = Field(default=2048, ge=1)
    """Spans waiting for the exporter; past it, counted drops."""
    batch_size: int = Field(default=512, ge=1)
    delay_seconds: float = Field(default=1.0, gt=0)
    """The longest a span waits in the queue before export."""
    timeout_seconds: float = Field(default=10.0, gt=0)
    """One OTLP export's deadline, and how long shutdown drains the export stage."""


class RateLimitOptions(_Group):
    per_second: float = Field(gt=0)
    burst: float | None = Field(default=None, gt=0)


class BudgetOptions(_Group):
    usd_per_hour: float = Field(ge=0)
    expected_cost_usd: float | None = Field(default=None, ge=0)


class RuleOptions(_Group):
    """Spans that match are sampled at `ratio` (`sampling.Rule`)."""

    match: str | dict[str, Any]
    """A span-name pattern (`chat *`) or attribute values that must all be equal."""
    ratio: float = Field(default=1.0, ge=0.0, le=1.0)


class SamplerOptions(_Group):
    """`sampling.py`'s samplers, as settings: (rule | ... | ratio) & rate_limit & budget."""

    ratio: float = Field(default=1.0, ge=0.0, le=1.0)
    """Share of traces evaluated, decided on the trace id exactly as the SDK does."""
    rules: list[RuleOptions] = Field(default_factory=list)
    rate_limit: RateLimitOptions | None = None
    budget: BudgetOptions | None = None

    def build(self) -> Sampler:
        """The sampler these settings describe: the one place samplers are built from them."""
        sampler: Sampler = Ratio(self.ratio) if self.ratio < 1.0 else Always()
        if self.rules:
            parts = [Rule(rule.match, Ratio(rule.ratio)) for rule in self.rules]
            sampler = parts[0]
            for rule in parts[1:]:
                sampler = sampler | rule
            sampler = sampler | Ratio(self.ratio)
        if self.rate_limit is not None:
            sampler = sampler & RateLimit(self.rate_limit.per_second, self.rate_limit.burst)
        if self.budget is not None:
            sampler = sampler & Budget(self.budget.usd_per_hour, self.budget.expected_cost_usd)
        return sampler


class DocumentBounds(_Group):
    """The per-trace `DocumentStore` of retrieved documents."""

    max_bytes: int = Field(default=64 * 1024 * 1024, ge=1)
    max_traces: int = Field(default=16384, ge=1)
    max_documents: int = Field(default=256, ge=1)
    max_age_seconds: float = Field(default=300.0, gt=0)


class ImportedEvaluator(_Group):
    """An evaluator of one's own: `import: package.module:factory`, called with `kwargs`."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    import_path: str = Field(alias="import", pattern=r"^[\w.]+:[\w.]+$")
    kwargs: dict[str, Any] = Field(default_factory=dict)


class _SinkDelivery(_Group):
    """How a result sink delivers (`tracefact.sinks.HTTPSink`'s options)."""

    headers: dict[str, str] = Field(default_factory=dict)
    timeout_seconds: float = Field(default=10.0, gt=0)
    max_batch_size: int = Field(default=100, ge=1)
    queue_size: int = Field(default=2048, ge=1)
    """Results waiting at once; past it new ones are dropped and counted."""
    max_retries: int = Field(default=6, ge=0)
    drain_seconds: float = Field(default=5.0, gt=0)
    """How long shutdown keeps delivering (a durable queue keeps what is cut off)."""

    def delivery(self, meter_provider: MeterProvider | None) -> dict[str, Any]:
        return {**self.model_dump(exclude={"type"}), "meter_provider": meter_provider}


class PhoenixSinkOptions(_SinkDelivery):
    """`{type: phoenix}`: results as Phoenix span annotations (`sinks.PhoenixAnnotations`)."""

    type: Literal["phoenix"]
    endpoint: str = "http://127.0.0.1:6006"
    api_key: str | None = None
    identifier: str = "tracefact"
    """A re-sent annotation (after a restart) replaces the first instead of adding one."""

    def build(self, meter_provider: MeterProvider | None) -> ResultSink:
        from tracefact.sinks.phoenix import PhoenixAnnotations

        options = self.delivery(meter_provider)
        return PhoenixAnnotations(options.pop("endpoint"), **options)


class MLflowSinkOptions(_SinkDelivery):
    """`{type: mlflow}`: results as MLflow assessments (`sinks.MLflowAssessments`)."""

    type: Literal["mlflow"]
    tracking_uri: str = "http://127.0.0.1:5000"

    def build(self, meter_provider: MeterProvider | None) -> ResultSink:
        from tracefact.sinks.mlflow import MLflowAssessments

        options = self.delivery(meter_provider)
        return MLflowAssessments(options.pop("tracking_uri"), **options)


class ImportedSinkOptions(_Group):
    """`{type: import, import: package.module:factory, kwargs: {...}}`: a sink of one's own.

    An `HTTPSink` subclass, say; the factory is called with `kwargs` and `meter_provider`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    type: Literal["import"]
    import_path: str = Field(alias="import", pattern=r"^[\w.]+:[\w.]+$")
    kwargs: dict[str, Any] = Field(default_factory=dict)

    def build(self, meter_provider: MeterProvider | None) -> ResultSink:
        module_name, _, attribute = self.import_path.partition(":")
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
        sink = target(**self.kwargs, meter_provider=meter_provider)
        if not isinstance(sink, ResultSink):
            raise TypeError(f"{self.import_path} returned {type(sink).__name__}, not a ResultSink")
        return sink


SinkOptions = Annotated[
    PhoenixSinkOptions | MLflowSinkOptions | ImportedSinkOptions, Field(discriminator="type")
]
"""One result sink as settings: the sinks `configure(sinks=...)` takes as objects."""


def build_sinks(
    specs: Sequence[PhoenixSinkOptions | MLflowSinkOptions | ImportedSinkOptions],
    meter_provider: MeterProvider | None,
    where: str = "evaluation.sinks",
) -> list[ResultSink]:
    """The sinks `specs` describe, counting on `meter_provider`; errors name the entry."""
    sinks = []
    for index, spec in enumerate(specs):
        try:
            sinks.append(spec.build(meter_provider))
        except Exception as exc:
            raise ConfigurationError(f"{where}.{index}: {exc}") from None
    return sinks


class EvaluationOptions(PipelineOptions):
    """Which LLM spans are evaluated, by what, and how (plus `PipelineOptions`' fields)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    evaluators: list[str | ImportedEvaluator] = Field(default=["local"])
    """Registry specs (`local`, `lexical`, `judge:MODEL`...) or `{import: mod:factory}`;
    configure() also takes evaluator objects."""
    api_base: str | None = None
    """For judges (and Vectara): an OpenAI-compatible or proxy base URL."""
    sampler: SamplerOptions = SamplerOptions()
    documents: DocumentBounds = DocumentBounds()

    def pipeline_options(self) -> PipelineOptions:
        """The evaluation pipeline's share of these settings."""
        return PipelineOptions(**self.model_dump(include=set(PipelineOptions.model_fields)))

    def build_evaluators(self, where: str = "evaluation.evaluators") -> list[Evaluator]:
        """The evaluators these specs name; an error names `where` and the entry."""
        return build_evaluators(self.evaluators, self.api_base, where)


class MonitorOptions(_Group):
    """The live hallucination rate (`tracefact.monitor`)."""

    group_by: tuple[str, ...] = live.DEFAULT_GROUP_BY
    """Attributes the rate is kept apart by (model, service, route, prompt_version or names)."""
    max_groups: int = Field(default=live.DEFAULT_MAX_GROUPS, ge=1)
    """Groups kept apart per evaluator; the rest pool into one."""
    window_seconds: float = Field(default=live.DEFAULT_WINDOW_SECONDS, gt=0)
    """The sliding window of the rate's gauges (the counters are cumulative)."""

    def rate_monitor(
        self, evaluators: Sequence[str], meter_provider: MeterProvider | None
    ) -> live.RateMonitor:
        """The live rate of what these evaluators judge, on `meter_provider`."""
        return live.rate_monitor(
            list(evaluators),
            meter_provider,
            group_by=self.group_by,
            max_groups=self.max_groups,
            window_seconds=self.window_seconds,
        )


class ReviewOptions(_Group):
    """Human review of a random sample, and the corrected rate (`tracefact.review`).

    Off until `probabilities` or `labels_per_day` is set; never both.
    """

    probabilities: dict[str, float] | None = None
    """Selection probability per stratum (`group/verdict`), per verdict
    (hallucinated, factual, none) or `*`: the first that names a span's stratum."""
    labels_per_day: float | None = Field(default=None, gt=0)
    """Or a budget of labels a day, allocated by Neyman over the strata, hourly."""
    group_by: tuple[str, ...] = ()
    """Attributes whose values join the verdict in a stratum (a group's own rate)."""
    window_seconds: float = Field(default=7 * 24 * 3600.0, gt=0)
    """The corrected rate's window, by span end time (a late label revises its window)."""
    min_labels: int = Field(default=30, ge=1)
    """Labels a stratum holding `min_share` of the weight needs before a figure is shown."""
    min_share: float = Field(default=0.05, gt=0, le=1)
    target_half_width: float = Field(default=0.02, gt=0, lt=1)
    """The half-width the labels-needed advice aims at."""
    initial_probability: float = Field(default=0.05, gt=0, le=1)
    """With a budget: π until the first hour of traffic has been seen."""
    annotation_name: str = Field(default="tracefact.review", min_length=1)
    """The annotation name people label selected spans under in Phoenix."""
    double_share: float = Field(default=0.0, ge=0, le=1)
    """The share of selected spans a second reviewer labels too: their disagreements
    measure the reviewers' own error, which the corrected rate is then corrected for
    (with 0 it is not measured, and the figure says so)."""

    @model_validator(mode="after")
    def _one_design(self) -> ReviewOptions:
        if self.probabilities is not None and self.labels_per_day is not None:
            raise ValueError("give probabilities or labels_per_day, not both")
        for key, value in (self.probabilities or {}).items():
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"probability of {key!r} must be in [0, 1], not {value}")
        return self

    @property
    def enabled(self) -> bool:
        return self.probabilities is not None or self.labels_per_day is not None

    def sampler(self) -> ReviewSampler | None:
        """The review selection these settings describe; None when review is off."""
        if not self.enabled:
            return None
        return ReviewSampler(
            probabilities=self.probabilities,
            labels_per_day=self.labels_per_day,
            group_by=self.group_by,
            min_labels=self.min_labels,
            min_share=self.min_share,
            initial_probability=self.initial_probability,
            double_share=self.double_share,
        )


class PrometheusOptions(_Group):
    """A `/metrics` endpoint of the SDK's own (`configure(prometheus=...)`)."""

    port: int | None = Field(default=None, ge=0, le=65535)
    """Serve /metrics on this port (0: any free); None: no endpoint."""
    host: str = "127.0.0.1"


GROUPS: dict[str, type[BaseModel]] = {
    "export": ExportOptions,
    "capture": CaptureOptions,
    "evaluation": EvaluationOptions,
    "monitor": MonitorOptions,
    "prometheus": PrometheusOptions,
    "review": ReviewOptions,
}


# --- the table -------------------------------------------------------------------------------
Environment = Literal["text", "json", "list"]
"""How a `TRACEFACT_*` value is read: as text, as JSON (a dict), or comma-separated."""


@dataclass(frozen=True)
class Setting:
    """One setting by its flat name: the `configure()` keyword and `TRACEFACT_<NAME>`.

    Attributes:
        path: where it lives in the groups; None for an object only `configure()` takes.
        env: how `TRACEFACT_<NAME>` is read; None when the environment cannot set it.
        argument: the keyword's type where it differs from the field's (it takes objects).
        to_field: with `argument`, the field's value out of the keyword's (None: the
            objects stand in for the field, which is then left alone).
    """

    name: str
    path: tuple[str, ...] | None
    env: Environment | None = "text"
    argument: Any = None
    to_field: Callable[[Any], Any] | None = None

    @property
    def variable(self) -> str:
        return f"TRACEFACT_{self.name.upper()}"


def _evaluator_objects(value: list[Any]) -> list[Any]:
    for item in value:
        if isinstance(item, str):
            raise PydanticCustomError(
                "evaluator_type",
                "takes evaluator objects, not the spec {spec}: use "
                "tracefact.evaluators.registry.from_spec or TRACEFACT_EVALUATORS",
                {"spec": repr(item)},
            )
        if not isinstance(getattr(item, "name", None), str) or not callable(
            getattr(item, "evaluate", None)
        ):
            raise PydanticCustomError(
                "evaluator_type",
                "{kind} is not an evaluator (name and evaluate)",
                {"kind": type(item).__name__},
            )
    return value


def _exporters(value: Any) -> Any:
    for item in exporter_list(value):
        if isinstance(item, str):
            _exporter_names(item)
    return value


_Exporter = str | InstanceOf[SpanExporter]
_Scrubbing = Annotated[InstanceOf[ScrubbingOptions], AfterValidator(check_scrubbing)]


def _names(value: str | list[str]) -> tuple[str, ...]:
    """Attribute names, given as a list or comma-separated (as in TRACEFACT_*)."""
    names = value.split(",") if isinstance(value, str) else value
    return tuple(n.strip() for n in names if n.strip())


def exporter_list(value: Any) -> list[str | SpanExporter]:
    """`configure(exporter=...)` as a list: names (comma-separated ones split) and objects."""
    items = value if isinstance(value, list | tuple) else [value]
    out: list[str | SpanExporter] = []
    for item in items:
        if isinstance(item, str):
            out.extend(name.strip() for name in item.split(","))
        else:
            out.append(item)
    return out


def _exporter_field(value: Any) -> str:
    names = [item for item in exporter_list(value) if isinstance(item, str)]
    return ",".join(names) if names else "none"


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        # export
        Setting("service_name", ("export", "service_name")),
        Setting(
            "exporter",
            ("export", "exporter"),
            argument=Annotated[_Exporter | list[_Exporter], AfterValidator(_exporters)],
            to_field=_exporter_field,
        ),
        Setting("endpoint", ("export", "endpoint")),
        Setting("headers", ("export", "headers"), env="json"),
        Setting("resource_attributes", ("export", "resource_attributes"), env="json"),
        Setting("export_queue_size", ("export", "queue_size")),
        Setting("export_batch_size", ("export", "batch_size")),
        Setting("export_delay_seconds", ("export", "delay_seconds")),
        Setting("export_timeout_seconds", ("export", "timeout_seconds")),
        # capture
        Setting("capture_content", ("capture", "capture_content")),
        Setting("max_attribute_length", ("capture", "max_attribute_length")),
        Setting("redact", ("capture", "redact"), env=None),
        Setting(
            "scrubbing",
            None,
            env=None,
            argument=bool | _Scrubbing,
        ),
        # evaluation
        Setting(
            "evaluators",
            ("evaluation", "evaluators"),
            env="list",
            argument=Annotated[list[Any], AfterValidator(_evaluator_objects)],
        ),
        Setting("api_base", ("evaluation", "api_base")),
        Setting("sample_rate", ("evaluation", "sampler", "ratio")),
        Setting("sampler", None, env=None, argument=InstanceOf[Sampler]),
        Setting("attach", ("evaluation", "attach")),
        Setting("queue_size", ("evaluation", "queue_size")),
        Setting("concurrency", ("evaluation", "concurrency")),
        Setting("timeout_seconds", ("evaluation", "timeout_seconds")),
        Setting("max_retries", ("evaluation", "max_retries")),
        Setting("max_hold_seconds", ("evaluation", "max_hold_seconds")),
        Setting("drain_seconds", ("evaluation", "drain_seconds")),
        Setting("documents_max_bytes", ("evaluation", "documents", "max_bytes")),
        Setting("documents_max_traces", ("evaluation", "documents", "max_traces")),
        Setting("documents_max_documents", ("evaluation", "documents", "max_documents")),
        Setting("documents_max_age_seconds", ("evaluation", "documents", "max_age_seconds")),
        Setting("sinks", None, env=None, argument=list[InstanceOf[ResultSink]]),
        # monitor
        Setting(
            "monitor_group_by",
            ("monitor", "group_by"),
            env="list",
            argument=str | list[Annotated[str, Field(min_length=1)]],
            to_field=_names,
        ),
        Setting("monitor_max_groups", ("monitor", "max_groups")),
        Setting("monitor_window_seconds", ("monitor", "window_seconds")),
        # prometheus
        Setting("prometheus_port", ("prometheus", "port")),
        Setting("prometheus_host", ("prometheus", "host")),
        # review
        Setting("review_probabilities", ("review", "probabilities"), env="json"),
        Setting("review_labels_per_day", ("review", "labels_per_day")),
        Setting(
            "review_group_by",
            ("review", "group_by"),
            env="list",
            argument=str | list[Annotated[str, Field(min_length=1)]],
            to_field=_names,
        ),
        Setting("review_window_seconds", ("review", "window_seconds")),
        Setting("review_min_labels", ("review", "min_labels")),
        Setting("review_min_share", ("review", "min_share")),
        Setting("review_target_half_width", ("review", "target_half_width")),
        Setting("review_initial_probability", ("review", "initial_probability")),
        Setting("review_annotation_name", ("review", "annotation_name")),
        Setting("review_double_share", ("review", "double_share")),
        # reading spans no convention covers
        Setting("span_mapping", None, env=None, argument=Callable[..., Any] | dict[str, Any]),
        Setting("contexts_from_prompt", None, env=None, argument=bool),
        Setting(
            "exclude_tools",
            None,
            env=None,
            argument=list[Annotated[str, Field(min_length=1)]],
        ),
        # the providers tracefact plugs into
        Setting("tracer_provider", None, env=None, argument=InstanceOf[TracerProvider]),
        Setting("meter_provider", None, env=None, argument=InstanceOf[MeterProvider]),
    )
}
"""Every setting by its flat name, in the order `configure()` documents them."""


def _field_type(path: tuple[str, ...]) -> Any:
    """The declared type of the field at `path`, bounds included, as a `TypeAdapter` takes."""
    model: Any = GROUPS[path[0]]
    for part in path[1:-1]:
        model = model.model_fields[part].annotation
    field = model.model_fields[path[-1]]
    if not field.metadata:
        return field.annotation
    parts = (field.annotation, *field.metadata)
    return Annotated[parts]  # Annotated[T, *metadata]


@functools.cache
def _adapter(name: str, keyword: bool) -> TypeAdapter[Any]:
    """The validator of setting `name`: as `configure()`'s keyword takes it, or as its field."""
    setting = SETTINGS[name]
    if keyword and setting.argument is not None:
        return TypeAdapter(setting.argument)
    assert setting.path is not None, f"{name} is an object: its keyword has a type"
    return TypeAdapter(_field_type(setting.path))


def invalid(where: str, error: ValidationError) -> Exception:
    """One line naming `where` the value was given; TypeError for a wrong type."""
    errors = error.errors()
    # Of a union's alternatives, the one that failed on its value says more than the others.
    first = next((e for e in errors if not _type_error(e["type"])), errors[0])
    inner = ".".join(str(part) for part in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    text = f"{where}: {message}" + (f" (at {inner})" if inner else "")
    return TypeError(text) if _type_error(first["type"]) else ConfigurationError(text)


def _type_error(kind: str) -> bool:
    return kind.endswith("_type") or kind in ("is_instance_of", "callable_type")


def check_argument(name: str, value: Any) -> Any:
    """`configure(name=value)` checked strictly against the table; the value validated."""
    if isinstance(value, tuple):
        value = list(value)  # a tuple where a list is declared is as good
    try:
        return _adapter(name, keyword=True).validate_python(value, strict=True)
    except ValidationError as exc:
        raise invalid(f"configure({name}=...)", exc) from None


def read_variable(setting: Setting, raw: str) -> Any:
    """`TRACEFACT_<NAME>`'s text as the setting's value, or an error naming the variable."""
    where = f"{setting.variable}={raw!r} ({setting.name})"
    try:
        if setting.env == "json":
            value: Any = json.loads(raw)
        elif setting.env == "list":
            value = [part.strip() for part in raw.split(",") if part.strip()]
        else:
            value = raw
        return _adapter(setting.name, keyword=False).validate_python(value)
    except ValueError as exc:  # ValidationError, and JSON's errors
        if isinstance(exc, ValidationError):
            raise invalid(where, exc) from None
        raise ConfigurationError(f"{where}: not JSON: {exc}") from None


@dataclass(frozen=True)
class Resolved:
    """Every group's options, resolved: arguments, then group objects, then variables."""

    export: ExportOptions
    capture: CaptureOptions
    evaluation: EvaluationOptions
    monitor: MonitorOptions
    prometheus: PrometheusOptions
    review: ReviewOptions

    @classmethod
    def from_environment(cls, **arguments: Any) -> Resolved:
        """The groups from flat `arguments` and `TRACEFACT_*` (what `Settings(...)` was)."""
        return resolve(arguments, {}, os.environ)

    def pipeline_options(self) -> PipelineOptions:
        """The evaluation pipeline's share of these settings."""
        return self.evaluation.pipeline_options()


Settings = Resolved.from_environment
"""The former `Settings(**options)`: every option from arguments or `TRACEFACT_*`."""


def resolve(
    arguments: Mapping[str, Any],
    groups: Mapping[str, BaseModel | None],
    environ: Mapping[str, str],
) -> Resolved:
    """The groups, each setting taken from the first place that gives it.

    `arguments`: `configure()`'s flat keywords (None: not given); `groups`: its group
    objects (only the fields their caller set count); `environ`: `TRACEFACT_*`.
    """
    data: dict[str, dict[str, Any]] = {name: {} for name in GROUPS}
    for name, group in groups.items():
        if group is not None and not isinstance(group, GROUPS[name]):
            kind = GROUPS[name].__name__
            raise TypeError(f"configure({name}=...) must be a {kind}, not {type(group).__name__}")
        if group is not None:
            data[name] = _set_fields(group)
    for setting in SETTINGS.values():
        if setting.path is None:
            continue
        value = arguments.get(setting.name)
        if value is not None:
            value = check_argument(setting.name, value)
            if setting.argument is not None:
                value = setting.to_field(value) if setting.to_field is not None else None
            if value is not None:
                _put(data, setting.path, value)
        elif _get(data, setting.path) is None and setting.env and setting.variable in environ:
            _put(data, setting.path, read_variable(setting, environ[setting.variable]))
    try:
        built = {name: GROUPS[name].model_validate(data[name]) for name in GROUPS}
    except ValidationError as exc:
        raise invalid(f"configure({exc.title})", exc) from None
    return Resolved(**built)  # type: ignore[arg-type]


def _set_fields(group: BaseModel) -> dict[str, Any]:
    """The fields a group object's caller set, nested groups included (as dicts)."""
    fields: dict[str, Any] = {}
    for name in group.model_fields_set:
        value = getattr(group, name)
        fields[name] = _set_fields(value) if isinstance(value, BaseModel) else value
    return fields


def _get(data: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = data
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = data
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
