"""The Claude Code CLI's own OTLP metrics as a second cost source: a loopback receiver run for one turn.

Claude Code exports its cost (`claude_code.cost.usage`, USD) and token counters
(`claude_code.token.usage`, by a `type` attribute) over OTLP when its telemetry is switched on.
With `[agent].otlp_cost = true` the harness runs this receiver on 127.0.0.1 for the turn, points
the CLI's metrics exporter at it, and reads the totals once the process has ended. The stream's
`result` stays the first source; these totals stand in when the stream gave none.

What the CLI sends is hostile input: a body is bounded, must decode as an
ExportMetricsServiceRequest (protobuf or its JSON form), and only the two metrics' sum points
are read. The receiver stops on its own after a bounded life, whatever the turn does.
`opentelemetry-proto` is imported only when a receiver starts: the option is off by default.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

COST_METRIC = "claude_code.cost.usage"
TOKEN_METRIC = "claude_code.token.usage"
METRICS_PATH = "/v1/metrics"
MAX_BODY_BYTES = 4 * 1024 * 1024
# The CLI also flushes when it exits; a short interval means a killed turn still reported most of it.
EXPORT_INTERVAL_MS = 2000
# OTLP's AggregationTemporality values.
_DELTA = 1
_CUMULATIVE = 2
_READ_TIMEOUT_SECONDS = 5.0
_MAX_TOKEN_TYPES = 8


class OtlpUnavailable(RuntimeError):
    """opentelemetry-proto is not installed, so the receiver cannot decode anything."""


@attrs.frozen
class OtlpUsage:
    cost_usd: float | None  # None: no cost point arrived
    tokens: Mapping[str, int]  # by the point's `type` attribute (input, output, cacheRead, ...)
    requests: int  # export requests accepted
    rejected: int  # requests refused (too large, undecodable, wrong path)


def telemetry_env(endpoint: str) -> dict[str, str]:
    """The CLI's environment for exporting its metrics (and nothing else) to the receiver at `endpoint`."""
    return {
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        # The metrics-specific URL wins over an OTEL_EXPORTER_OTLP_ENDPOINT the engine inherited.
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": f"{endpoint}{METRICS_PATH}",
        "OTEL_METRIC_EXPORT_INTERVAL": str(EXPORT_INTERVAL_MS),
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_TRACES_EXPORTER": "none",
    }


MISSING_DEPENDENCY = (
    "[agent].otlp_cost needs opentelemetry-proto: `pip install 'crucible-plugin-harness-claude[otlp]'`, "
    "or set otlp_cost = false"
)


def _request_type() -> Any:
    try:
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
            ExportMetricsServiceRequest,
        )
    except ImportError as exc:
        raise OtlpUnavailable(MISSING_DEPENDENCY) from exc
    return ExportMetricsServiceRequest


def otlp_unavailable() -> str | None:
    """What stops a receiver from decoding anything (the missing dependency, and its fix); None: nothing."""
    try:
        _request_type()
    except OtlpUnavailable as exc:
        return str(exc)
    return None


def decode_request(body: bytes, content_type: str) -> Any:
    """An ExportMetricsServiceRequest from an OTLP/HTTP body; ValueError when it is not one."""
    request_type = _request_type()
    request = request_type()
    try:
        if content_type.split(";")[0].strip().lower() == "application/json":
            from google.protobuf import json_format  # type: ignore[import-untyped]

            json_format.Parse(body.decode("utf-8"), request, ignore_unknown_fields=True)
        else:
            request.ParseFromString(body)
    except Exception as exc:  # DecodeError, ParseError, UnicodeDecodeError, RecursionError
        raise ValueError(f"not an OTLP metrics request: {exc.__class__.__name__}") from exc
    return request


def _attribute(any_value: Any) -> Any:
    field = any_value.WhichOneof("value")
    return getattr(any_value, field) if field in ("string_value", "int_value", "bool_value") else None


@attrs.define
class MetricTotals:
    """The two metrics' points, folded: a delta point adds, a cumulative point replaces its series."""

    _delta: dict[tuple[Any, ...], float] = attrs.field(factory=dict)
    _cumulative: dict[tuple[Any, ...], tuple[int, float]] = attrs.field(factory=dict)

    def fold(self, request: Any) -> None:
        for resource in request.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name not in (COST_METRIC, TOKEN_METRIC) or not metric.HasField("sum"):
                        continue
                    cumulative = metric.sum.aggregation_temporality == _CUMULATIVE
                    for point in metric.sum.data_points:
                        value = float(point.as_double if point.HasField("as_double") else point.as_int)
                        if not math.isfinite(value) or value < 0:
                            continue  # a counter never goes negative; such a point is noise or malice
                        attrs_key = tuple(sorted((kv.key, _attribute(kv.value)) for kv in point.attributes))
                        key = (metric.name, attrs_key)
                        if cumulative:
                            seen = self._cumulative.get(key)
                            if seen is None or point.time_unix_nano >= seen[0]:
                                self._cumulative[key] = (point.time_unix_nano, value)
                        else:
                            self._delta[key] = self._delta.get(key, 0.0) + value

    def _series(self) -> list[tuple[tuple[Any, ...], float]]:
        merged = dict(self._delta)
        for key, (_, value) in self._cumulative.items():
            merged[key] = merged.get(key, 0.0) + value
        return list(merged.items())

    def cost_usd(self) -> float | None:
        costs = [value for (name, _), value in self._series() if name == COST_METRIC]
        return sum(costs) if costs else None

    def tokens(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for (name, attributes), value in self._series():
            if name == TOKEN_METRIC:
                kind = str(dict(attributes).get("type") or "other")[:40]
                totals[kind] = totals.get(kind, 0) + int(value)
        # The types are the sender's words: a handful is what the CLI uses, more is noise for the log.
        return dict(sorted(totals.items(), key=lambda item: -item[1])[:_MAX_TOKEN_TYPES])


class MetricsReceiver:
    """An OTLP/HTTP metrics endpoint on 127.0.0.1 for one turn; a context manager that stops it."""

    def __init__(self, max_life_seconds: float, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        _request_type()  # fail before the turn starts, not on the first export
        self._totals = MetricTotals()
        self._lock = threading.Lock()
        self._requests = 0
        self._rejected = 0
        self._max_body = max_body_bytes
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-cost", daemon=True)
        self._expiry = threading.Timer(max_life_seconds, self.stop)
        self._expiry.daemon = True
        self._stopped = threading.Event()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> MetricsReceiver:
        self._thread.start()
        self._expiry.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._expiry.cancel()
        self._server.shutdown()
        self._server.server_close()

    def usage(self) -> OtlpUsage:
        with self._lock:
            return OtlpUsage(self._totals.cost_usd(), self._totals.tokens(), self._requests, self._rejected)

    def _accept(self, path: str, content_type: str, body: bytes | None) -> int:
        """The HTTP status for one request, folding its points in when it is a good one."""
        if path.split("?")[0] != METRICS_PATH or body is None:
            status = 404 if body is not None else 413
        else:
            try:
                request = decode_request(body, content_type)
            except ValueError:
                status = 400
            else:
                with self._lock:
                    self._totals.fold(request)
                    self._requests += 1
                return 200
        with self._lock:
            self._rejected += 1
        return status

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            timeout = _READ_TIMEOUT_SECONDS

            def do_POST(self) -> None:
                try:
                    length = int(self.headers.get("Content-Length") or "-1")
                except ValueError:
                    length = -1
                body = self.rfile.read(length) if 0 <= length <= receiver._max_body else None
                content_type = self.headers.get("Content-Type") or "application/x-protobuf"
                status = receiver._accept(self.path, content_type, body)
                json_reply = content_type.startswith("application/json")
                reply = b"{}" if json_reply else b""  # an empty ExportMetricsServiceResponse
                self.send_response(status)
                self.send_header(
                    "Content-Type", "application/json" if json_reply else "application/x-protobuf"
                )
                self.send_header("Content-Length", str(len(reply)))
                if body is None:
                    self.send_header("Connection", "close")  # the unread body must not be parsed as a request
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the CLI's exports are not the engine's console output

        return Handler


def choose_cost(stream_cost: float | None, otlp_cost: float | None, estimated: float) -> tuple[float, str]:
    """A turn's cost and where it came from: the stream's result, else the CLI's OTLP metrics, else the priced usage."""
    if stream_cost is not None:
        return stream_cost, "stream"
    if otlp_cost is not None:
        return otlp_cost, "otlp"
    return estimated, "estimate"
