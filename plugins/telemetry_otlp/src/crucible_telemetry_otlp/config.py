"""Whether a run sends telemetry: the standard OpenTelemetry exporter variables name a collector."""

from __future__ import annotations

import os
from collections.abc import Mapping

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
# Metrics are read once at the run end (and every METRICS_INTERVAL_MILLIS on the way, for a long run).
METRICS_INTERVAL_MILLIS = 30_000

# Bounds that keep a collector that is down from slowing a run: the exporter gives up on one
# request after EXPORT_TIMEOUT_SECONDS, the queue holds at most QUEUE_SPANS (the rest are
# dropped and counted), and the run end waits at most SHUTDOWN_SECONDS for the last batch.
EXPORT_TIMEOUT_SECONDS = 2.0
QUEUE_SPANS = 2048
BATCH_SPANS = 512
SCHEDULE_MILLIS = 500
SHUTDOWN_SECONDS = 3.0


def collector_configured(engine_env: Mapping[str, str]) -> bool:
    """True when the run's environment (or the process's) names an OTLP endpoint."""
    env = {**os.environ, **engine_env}
    return any(env.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def traces_endpoint(engine_env: Mapping[str, str]) -> str:
    """The traces URL as the OpenTelemetry specification builds it from the two variables."""
    env = {**os.environ, **engine_env}
    explicit = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if explicit:
        return explicit
    return env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip().rstrip("/") + "/v1/traces"


def metrics_endpoint(engine_env: Mapping[str, str]) -> str | None:
    """The metrics URL, or None when only a traces endpoint was named (metrics then stay home)."""
    env = {**os.environ, **engine_env}
    explicit = env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "").strip()
    if explicit:
        return explicit
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip().rstrip("/")
    return base + "/v1/metrics" if base else None
