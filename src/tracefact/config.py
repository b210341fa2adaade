"""tracefact's options: arguments to `configure`, else `TRACEFACT_*` environment variables."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

ExporterName = Literal["otlp", "console", "none"]


class Settings(BaseSettings):
    """Every option readable from the environment: `TRACEFACT_SERVICE_NAME`,
    `TRACEFACT_EXPORTER`, `TRACEFACT_CAPTURE_CONTENT`, ... (dicts as JSON)."""

    model_config = SettingsConfigDict(env_prefix="TRACEFACT_", extra="forbid")

    service_name: str | None = Field(
        default=None, description="service.name; OTEL_SERVICE_NAME is honoured when unset"
    )
    exporter: ExporterName = Field(
        default="otlp", description="where spans go; a SpanExporter may be passed to configure"
    )
    endpoint: str | None = Field(
        default=None,
        description="OTLP/HTTP endpoint (base or .../v1/traces); else OTEL_EXPORTER_OTLP_*",
    )
    headers: dict[str, str] | None = Field(default=None, description="OTLP request headers")
    resource_attributes: dict[str, str] = Field(default_factory=dict)
    capture_content: bool = Field(
        default=True, description="record texts; False keeps only sizes and sha256 hashes"
    )
    max_attribute_length: int = Field(
        default=8192, ge=16, description="longer texts are truncated with a visible marker"
    )
