"""tracefact's options: arguments to `configure`, else `TRACEFACT_*` environment variables."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tracefact.pipeline.options import PipelineOptions

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


class Settings(BaseSettings, PipelineOptions):
    """Every option readable from the environment.

    `TRACEFACT_SERVICE_NAME`, `TRACEFACT_EXPORTER`, `TRACEFACT_SAMPLE_RATE`, ... (dicts as JSON);
    the evaluation pipeline's (`TRACEFACT_QUEUE_SIZE`, ...) are `PipelineOptions`' fields.
    """

    model_config = SettingsConfigDict(env_prefix="TRACEFACT_", extra="forbid", frozen=False)

    # --- export -----------------------------------------------------------------
    service_name: str | None = Field(
        default=None, description="service.name; OTEL_SERVICE_NAME is honoured when unset"
    )
    exporter: str = Field(
        default="otlp",
        description="comma-separated: otlp, console, none, file:PATH (OTLP/JSON lines); "
        "configure() also takes SpanExporters",
    )
    endpoint: str | None = Field(
        default=None,
        description="OTLP/HTTP endpoint (base or .../v1/traces); else OTEL_EXPORTER_OTLP_*",
    )
    headers: dict[str, str] | None = Field(default=None, description="OTLP request headers")
    resource_attributes: dict[str, str] = Field(default_factory=dict)
    export_queue_size: int = Field(
        default=2048, ge=1, description="spans waiting for the exporter; past it, counted drops"
    )
    export_batch_size: int = Field(default=512, ge=1, description="spans per export call")
    export_delay_seconds: float = Field(
        default=1.0, gt=0, description="longest a span waits in the queue before export"
    )
    export_timeout_seconds: float = Field(
        default=10.0, gt=0, description="one OTLP export's deadline, and shutdown's drain"
    )

    # --- content capture ------------------------------------------------------------
    capture_content: bool = Field(
        default=True, description="record texts; False keeps only sizes and sha256 hashes"
    )
    max_attribute_length: int = Field(
        default=8192, ge=16, description="longer texts are truncated with a visible marker"
    )

    # --- evaluation ---------------------------------------------------------------------
    evaluators: str | None = Field(
        default=None,
        description="comma-separated evaluator specs: local (the default), lexical, judge:MODEL…",
    )
    sample_rate: float = Field(
        default=1.0, ge=0.0, le=1.0, description="share of traces evaluated (by trace id)"
    )

    # --- monitoring ---------------------------------------------------------------------
    monitor_group_by: str = Field(
        default="service,model",
        description="comma-separated: the live rate's groups (model, service, route, "
        "prompt_version or attribute names); empty for one group",
    )
    monitor_max_groups: int = Field(
        default=50, ge=1, description="groups kept apart per evaluator; the rest pool"
    )
    monitor_window_seconds: float = Field(
        default=300.0, gt=0, description="the sliding window of the live rate's gauges"
    )
    prometheus_port: int | None = Field(
        default=None, ge=0, le=65535, description="serve /metrics on this port (0: any free)"
    )
    prometheus_host: str = Field(default="127.0.0.1", description="the /metrics address")

    @field_validator("exporter")
    @classmethod
    def _known_exporters(cls, value: str) -> str:
        for name in value.split(","):
            error = exporter_name_error(name.strip())
            if error is not None:
                raise ValueError(f"exporter: {error}")
        return value

    def group_by(self) -> tuple[str, ...]:
        """`monitor_group_by` as names."""
        return tuple(n.strip() for n in self.monitor_group_by.split(",") if n.strip())

    def pipeline_options(self) -> PipelineOptions:
        """The evaluation pipeline's share of these settings."""
        return PipelineOptions(**self.model_dump(include=set(PipelineOptions.model_fields)))
