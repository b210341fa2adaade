"""The collector's configuration: one YAML file, validated, with `${ENV}` expansion.

Every key is checked (unknown keys are errors, so a typo is not silently ignored), and
an error names the key path (`upstreams.0.endpoint: Field required`) in one line: the
command prints it and exits 2. String values may use `${NAME}` or `${NAME:-default}`;
a variable that is unset and has no default is an error naming the key. The groups the
SDK's `configure()` reads too (`evaluation:`'s pipeline options, sampler and document
store, `evaluation.monitor:`) are the settings table's (`tracefact.config`), declared once.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from opentelemetry.metrics import MeterProvider
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from tracefact._imports import import_extra
from tracefact.config import (
    BudgetOptions,
    EvaluationOptions,
    MonitorOptions,
    RateLimitOptions,
    ReviewOptions,
    RuleOptions,
    SamplerOptions,
    SinkOptions,
)
from tracefact.errors import ConfigurationError

if TYPE_CHECKING:
    from tracefact.review.ledger import Label
    from tracefact.review.live import ReviewMonitor

QueueBackend = Literal["memory", "sqlite", "redis"]
"""Where received requests wait (`queue`): memory, or durable on SQLite or Redis Streams."""


class ConfigError(ConfigurationError):
    """The configuration file is missing, not YAML, or not valid: one line saying where."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HttpReceiverConfig(_Model):
    """OTLP/HTTP on `/v1/traces` (protobuf and JSON), plus health and metrics."""

    host: str = "127.0.0.1"
    """This machine only, as the OpenTelemetry Collector binds; 0.0.0.0 for every address
    (the container images set TRACEFACT_HOST=0.0.0.0)."""
    port: int = Field(default=4318, ge=0, le=65535)


class GrpcReceiverConfig(_Model):
    """OTLP/gRPC (`TraceService/Export`)."""

    host: str = "127.0.0.1"
    port: int = Field(default=4317, ge=0, le=65535)


class Receivers(_Model):
    """Set one to null to turn it off; at least one must stay on."""

    http: HttpReceiverConfig | None = HttpReceiverConfig()
    grpc: GrpcReceiverConfig | None = GrpcReceiverConfig()


class Auth(_Model):
    bearer_token: str | None = None
    """When set, requests must carry `Authorization: Bearer <token>` (401 / UNAUTHENTICATED)."""


class Limits(_Model):
    """What one request and one span may hold."""

    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    """Request body as sent (and again once decompressed); larger is 413 / INVALID_ARGUMENT."""
    max_spans_per_request: int = Field(default=100_000, ge=1)
    """Spans one request may carry once decoded; more is refused (413 / RESOURCE_EXHAUSTED)
    and counted: 8 MiB of empty spans is four million of them."""
    max_items_per_request: int = Field(default=500_000, ge=1)
    """Attributes (of spans, events, links, resources and scopes), events, links and the
    values nested in array and kvlist values one request may carry; more is refused (413 /
    RESOURCE_EXHAUSTED) and counted before the request is decoded. Decoded, an item costs
    50 to 90 bytes however small it is on the wire (two bytes): this bounds what a request
    costs at about 45 MiB beyond its spans."""
    max_bytes_in_flight: int = Field(default=64 * 1024 * 1024, ge=1024)
    """Request bodies the HTTP receiver reads and decodes at once, in bytes (by their
    Content-Length, `max_body_bytes` for a chunked one); a request past it is answered
    429 with a retry hint at once: memory stays bounded under concurrent large requests.
    An OTLP/JSON body is charged what Python's parse of it may cost too (`json_cost`,
    about 12 times an ordinary body), and one whose parse could never fit is a 413."""
    max_connections: int = Field(default=1024, ge=1)
    """HTTP connections served at once; one more is answered 503 with a retry hint at
    once and closed (a burst of several hundred clients is served)."""
    request_timeout_seconds: float = Field(default=30.0, gt=0)
    """A whole HTTP request (headers and body) must arrive within this; a connection
    that takes longer, or sits idle longer between requests, is closed (slow clients)."""
    max_attributes_per_span: int = Field(default=256, ge=1)
    """Per attribute list (span, event, link, resource, scope); further ones are dropped
    and counted in the owner's dropped_attributes_count."""
    max_attribute_value_bytes: int = Field(default=64 * 1024, ge=16)
    """Longer string values are truncated (UTF-8 safe) and counted."""

    @model_validator(mode="after")
    def _room_for_one_body(self) -> Limits:
        if self.max_bytes_in_flight < self.max_body_bytes:
            raise ValueError("max_bytes_in_flight must be at least max_body_bytes")
        return self


class Upstream(_Model):
    """An OTLP backend every span is forwarded to."""

    endpoint: str
    """HTTP: the base URL or the full `.../v1/traces` URL; gRPC: `host:port` (or a URL)."""
    protocol: Literal["http", "grpc"] = "http"
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_seconds: float = Field(default=10.0, gt=0)
    compression: Literal["none", "gzip"] = "none"

    @field_validator("endpoint")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value.strip()


class Forwarding(_Model):
    """The buffer between the engine and the upstreams, and how it is drained."""

    max_spans: int = Field(default=200_000, ge=1)
    """Spans held for forwarding (all upstreams); past it the receivers answer 429."""
    max_bytes: int = Field(default=256 * 1024 * 1024, ge=1024)
    """Encoded bytes held for forwarding; past it the receivers answer 429."""
    batch_spans: int = Field(default=2048, ge=1)
    """Most spans in one upstream request."""
    delay_seconds: float = Field(default=0.05, ge=0)
    """The longest spans wait for others to fill an upstream request (0: sent at once):
    fewer, fuller requests, each costing the collector a fixed ~0.5 ms of CPU."""
    retry_base_seconds: float = Field(default=0.5, ge=0)
    retry_max_seconds: float = Field(default=30.0, ge=0)
    """Backoff of a failing upstream (full jitter; Retry-After honoured up to this)."""
    retry_after_seconds: float = Field(default=1.0, gt=0)
    """The retry hint a refused client gets (429 Retry-After / RESOURCE_EXHAUSTED)."""


class ReviewConfig(ReviewOptions):
    """`evaluation.review:`: the settings table's `ReviewOptions` and the collector's own keys.

    The collector is the one process that holds selections and labels: it journals each
    evaluated span's selection to `state_path` (replayed at start, so a restart loses none),
    polls Phoenix for people's labels every `poll_seconds`, and publishes the corrected rate
    on /metrics (`tracefact.review.*`).
    """

    phoenix_endpoint: str | None = None
    """Phoenix's base URL, where reviewers label the selected spans (HUMAN annotations)."""
    phoenix_project: str = "default"
    phoenix_api_key: str | None = None
    poll_seconds: float = Field(default=60.0, gt=0)
    state_path: str | None = None
    """A file the selections are journaled to (JSON lines)."""

    def monitor(self, meter_provider: MeterProvider | None) -> ReviewMonitor | None:
        """The collector's review monitor; None when review is off."""
        from tracefact.review import phoenix
        from tracefact.review.ledger import Ledger
        from tracefact.review.live import Poller, ReviewMonitor

        if not self.enabled:
            return None
        poller: Poller | None = None
        if self.phoenix_endpoint:
            endpoint, project = self.phoenix_endpoint, self.phoenix_project
            name, api_key = self.annotation_name, self.phoenix_api_key

            def poll(ids: Sequence[tuple[str, str]]) -> list[Label]:
                with phoenix.client(endpoint, api_key) as http:
                    return phoenix.poll_labels(http, project, ids, name)

            poller = poll

        ledger = Ledger(
            self.window_seconds, self.min_labels, self.min_share, self.target_half_width
        )
        journal = Path(self.state_path) if self.state_path else None
        return ReviewMonitor(
            ledger, meter_provider, journal=journal, poller=poller, poll_seconds=self.poll_seconds
        )


class EvaluationConfig(EvaluationOptions):
    """`evaluation:`: the settings table's `EvaluationOptions` and the collector's own keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    """False: a pure forwarder (every span passes through untouched)."""
    window_seconds: float = Field(default=2.0, ge=0)
    """How long an LLM span waits for retriever spans of its trace sent in later requests."""
    window_max_spans: int = Field(default=10_000, ge=1)
    """LLM spans waiting in the window at once; past it the oldest leave early."""
    monitor: MonitorOptions = MonitorOptions()
    sinks: list[SinkOptions] = Field(default_factory=list)
    """Where results go besides the span: `{type: phoenix}` (annotations), `{type: mlflow}`
    (assessments), `{type: import, import: mod:factory}`; counted in tracefact.sink.results."""
    review: ReviewConfig = ReviewConfig()

    @model_validator(mode="after")
    def _something_to_run(self) -> EvaluationConfig:
        if self.enabled and not self.evaluators:
            raise ValueError("evaluators: name at least one, or set enabled: false")
        return self


Evaluation = EvaluationConfig
"""The former name of `EvaluationConfig`."""
SamplerConfig = SamplerOptions
"""The former name of `tracefact.config.SamplerOptions`."""
MonitorConfig = MonitorOptions
"""The former name of `tracefact.config.MonitorOptions`."""
RateLimitConfig = RateLimitOptions
BudgetConfig = BudgetOptions
RuleConfig = RuleOptions


class SqliteQueueConfig(_Model):
    """`queue: sqlite`: one file on one machine (`SqliteQueue`), surviving restarts."""

    path: str
    """The database file; keep it on a persistent volume."""
    synchronous: Literal["full", "normal"] = "full"
    """full: a stored request survives power loss; normal: process kills only, faster."""
    lease_seconds: float = Field(default=30.0, gt=0)
    """A request taken by a process that died is handed out again after this long."""
    max_bytes: int = Field(default=1 << 30, ge=1024)
    """Stored request bytes; past it, receivers answer 429."""


class RedisQueueConfig(_Model):
    """`queue: redis`: a Redis stream shared by collectors and `tracefact worker`s."""

    url: str = "redis://127.0.0.1:6379/0"
    """The Redis server (`rediss://` for TLS; a password in the URL)."""
    stream: str = "tracefact:requests"
    group: str = "tracefact"
    """The consumer group every collector and worker of the stream reads through."""
    lease_seconds: float = Field(
        default=30.0, gt=0, validation_alias=AliasChoices("lease_seconds", "claim_seconds")
    )
    """A dead consumer's entries are taken over by another after this long (the lease of
    `sqlite.lease_seconds`; `claim_seconds` is its former name, still read)."""
    consume: bool = True
    """False: this collector only receives and stores; workers process the stream."""
    documents_prefix: str = "tracefact:documents:"
    """Keys of the retrieved documents every consumer shares (one list per trace)."""


class Metrics(_Model):
    """`/metrics` is always served on the HTTP receiver; `port` adds an endpoint of its own."""

    host: str = "127.0.0.1"
    port: int | None = Field(default=None, ge=0, le=65535)


class Logging(_Model):
    format: Literal["json", "text"] = "json"
    level: Literal["debug", "info", "warning", "error"] = "info"
    summary_seconds: float = Field(default=60.0, ge=0)
    """Every this many seconds, one `summary` line: spans received, forwarded, evaluated,
    dropped, and the queue's depth, as /metrics counts them (0: none)."""


class CollectorConfig(_Model):
    """The whole file."""

    receivers: Receivers = Receivers()
    auth: Auth = Auth()
    limits: Limits = Limits()
    upstreams: list[Upstream] = Field(min_length=1)
    forwarding: Forwarding = Forwarding()
    evaluation: EvaluationConfig = EvaluationConfig()
    queue: QueueBackend = "memory"
    queue_max_requests: int = Field(default=1024, ge=1)
    """Received requests waiting for the engine; past it the receivers answer 429."""
    queue_max_age_seconds: float = Field(default=600.0, gt=0)
    """Durable queues: an LLM span taken later than this after it was stored goes on
    unevaluated with status `timeout` (a backlog drains instead of growing stale)."""
    queue_max_deliveries: int = Field(default=5, ge=1)
    """Durable queues: a request handed out more times than this (its consumers died
    with it) has its LLM spans go on unevaluated with status `error`, so one request
    cannot kill worker after worker."""
    sqlite: SqliteQueueConfig | None = None
    """Required with `queue: sqlite`."""
    redis: RedisQueueConfig | None = None
    """Required with `queue: redis` (`{}` for a local Redis)."""
    metrics: Metrics = Metrics()
    logging: Logging = Logging()
    drain_seconds: float = Field(
        default=15.0, gt=0, validation_alias=AliasChoices("drain_seconds", "shutdown_seconds")
    )
    """SIGTERM: the deadline to stop accepting, finish evaluations and flush upstream
    (`shutdown_seconds` is its former name, still read); `evaluation.drain_seconds` is
    the evaluations' share of it."""

    @property
    def shutdown_seconds(self) -> float:
        """The former name of `drain_seconds`."""
        return self.drain_seconds

    @model_validator(mode="after")
    def _drain_fits(self) -> CollectorConfig:
        if self.evaluation.drain_seconds >= self.drain_seconds:
            raise ValueError(
                "evaluation.drain_seconds must be under drain_seconds "
                "(the rest of the deadline flushes upstream)"
            )
        return self

    @field_validator("receivers")
    @classmethod
    def _one_receiver(cls, value: Receivers) -> Receivers:
        if value.http is None and value.grpc is None:
            raise ValueError("at least one of http and grpc must be on")
        return value

    @model_validator(mode="after")
    def _queue_settings(self) -> CollectorConfig:
        if self.queue == "sqlite" and self.sqlite is None:
            raise ValueError("queue: sqlite needs a `sqlite:` section with its path")
        if self.queue == "redis" and self.redis is None:
            raise ValueError("queue: redis needs a `redis:` section (`{}` for a local Redis)")
        return self


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand(value: Any, environ: Mapping[str, str], path: str = "") -> Any:
    """`${NAME}` and `${NAME:-default}` replaced in every string of a parsed YAML tree."""
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in environ:
                return environ[name]
            if default is not None:
                return default
            raise ConfigError(f"{path or '<root>'}: environment variable {name} is not set")

        return _VARIABLE.sub(substitute, value)
    if isinstance(value, dict):
        return {k: expand(v, environ, _join(path, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, environ, _join(path, i)) for i, v in enumerate(value)]
    return value


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def parse(data: Any, environ: Mapping[str, str] | None = None) -> CollectorConfig:
    """A validated configuration from a parsed YAML document."""
    if not isinstance(data, dict):
        raise ConfigError("<root>: the file must hold a mapping of keys (receivers, upstreams...)")
    expanded = expand(data, os.environ if environ is None else environ)
    try:
        return CollectorConfig.model_validate(expanded)
    except ValidationError as exc:
        raise ConfigError(_first_line(exc)) from None


def _first_line(exc: ValidationError) -> str:
    """The error to fix first: an unknown key (a typo explains the rest), else the first."""
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = f"unknown key {str(first['loc'][-1])!r}{_did_you_mean(first['loc'])}"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {message}{more}" if where else f"{message}{more}"


def _did_you_mean(loc: tuple[int | str, ...]) -> str:
    """`; did you mean 'upstreams'?` for a misspelt key, from the keys allowed there."""
    model: type[BaseModel] = CollectorConfig
    annotation: Any = None
    for part in loc[:-1]:
        if isinstance(part, int):  # a list index: the model stays
            continue
        if part in model.model_fields:
            annotation = model.model_fields[part].annotation
            model = _model_in(annotation) or model
        else:  # a tagged union's tag (`phoenix` of evaluation.sinks.0.phoenix)
            model = _model_in(annotation, tag=part) or model
    keys = [f.alias or n for n, f in model.model_fields.items()]
    close = difflib.get_close_matches(str(loc[-1]), keys, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _model_in(annotation: Any, tag: str | None = None) -> type[BaseModel] | None:
    """The configuration model inside a field's type (`X | None`, `list[X]`).

    With `tag`, the member of a tagged union whose `type` is `tag`.
    """
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        kind = annotation.model_fields.get("type")
        if tag is None or (kind is not None and tag in getattr(kind.annotation, "__args__", ())):
            return annotation
        return None
    for argument in getattr(annotation, "__args__", ()):
        if (found := _model_in(argument, tag)) is not None:
            return found
    return None


def load(path: Path, environ: Mapping[str, str] | None = None) -> CollectorConfig:
    """Read, expand and validate a configuration file."""
    yaml = import_extra("yaml", "collector")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a YAML file (not UTF-8 text)") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}:{where}: not valid YAML: {problem}") from None
    return parse(data, environ)
