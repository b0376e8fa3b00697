"""Temporal's ``runtime`` names (``Runtime``, ``TelemetryConfig`` and its parts), so ported code
that builds a runtime for ``Client.connect(runtime=...)`` keeps running.

Temporal's runtime is its Rust core: threads, gRPC, and the metrics and logs it exports.
Chronicle's SDK is plain Python over HTTP with none of that to configure, so these hold what
they are given and change nothing; Python's ``logging`` carries the SDK's logs (loggers
``sdk.*``) and the server exports its own metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import Any, ClassVar


class MetricBuckets(Enum):
    DEFAULT = "default"


@dataclass(frozen=True)
class TelemetryFilter:
    core_level: str = "WARN"
    other_level: str = "ERROR"

    def formatted(self) -> str:
        return f"{self.other_level},temporal_sdk_core={self.core_level}"


@dataclass(frozen=True)
class LoggingConfig:
    filter: TelemetryFilter | str = field(default_factory=TelemetryFilter)
    forwarding: Any = None

    default: ClassVar[LoggingConfig]


LoggingConfig.default = LoggingConfig()


@dataclass(frozen=True)
class PrometheusConfig:
    bind_address: str
    counters_total_suffix: bool = False
    unit_suffix: bool = False
    durations_as_seconds: bool = False
    histogram_bucket_overrides: Mapping[str, list[float]] | None = None


@dataclass(frozen=True)
class OpenTelemetryConfig:
    url: str
    headers: Mapping[str, str] | None = None
    metric_periodicity: timedelta | None = None
    durations_as_seconds: bool = False


@dataclass(frozen=True)
class TelemetryConfig:
    logging: LoggingConfig | None = LoggingConfig.default
    metrics: PrometheusConfig | OpenTelemetryConfig | Any | None = None
    global_tags: Mapping[str, str] = field(default_factory=dict)
    attach_service_name: bool = True
    metric_prefix: str | None = None


@dataclass(frozen=True)
class Runtime:
    """Accepted where Temporal takes a runtime; there is no core runtime to configure."""

    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)

    _default: ClassVar[Runtime | None] = None

    @staticmethod
    def default() -> Runtime:
        if Runtime._default is None:
            Runtime._default = Runtime()
        return Runtime._default

    @staticmethod
    def set_default(runtime: Runtime, *, error_if_already_set: bool = True) -> None:
        if error_if_already_set and Runtime._default is not None:
            raise RuntimeError("Runtime default already set")
        Runtime._default = runtime


__all__ = [
    "LoggingConfig",
    "MetricBuckets",
    "OpenTelemetryConfig",
    "PrometheusConfig",
    "Runtime",
    "TelemetryConfig",
    "TelemetryFilter",
]
