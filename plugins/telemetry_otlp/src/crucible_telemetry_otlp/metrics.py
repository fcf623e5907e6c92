"""A run's metrics (cost, tokens, iterations, keeps, measure time), sent over OTLP/HTTP beside its trace."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from crucible_telemetry_otlp import config


class RunMetrics:
    """The instruments of one run segment; every value carries the run id through the resource."""

    def __init__(self, endpoint: str, resource: Resource) -> None:
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=endpoint, timeout=config.EXPORT_TIMEOUT_SECONDS),
            export_interval_millis=config.METRICS_INTERVAL_MILLIS,
            export_timeout_millis=int(config.EXPORT_TIMEOUT_SECONDS * 1000),
        )
        self.provider = MeterProvider(resource=resource, metric_readers=[reader], shutdown_on_exit=False)
        meter = self.provider.get_meter("crucible")
        self.cost = meter.create_counter(
            "crucible.cost", unit="USD", description="what agent turns and tasks cost"
        )
        self.tokens = meter.create_counter(
            "crucible.tokens", unit="{token}", description="agent tokens by type"
        )
        self.iterations = meter.create_counter("crucible.iterations", description="iterations started")
        self.keeps = meter.create_counter("crucible.keeps", description="iterations kept")
        self.measure_time = meter.create_histogram(
            "crucible.measure.duration", unit="s", description="wall-clock of one measure step"
        )

    def shutdown(self) -> None:
        self.provider.shutdown(timeout_millis=config.SHUTDOWN_SECONDS * 1000)
