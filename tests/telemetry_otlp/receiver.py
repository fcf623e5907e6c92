"""A loopback OTLP/HTTP collector for the telemetry tests: decodes what it is sent with opentelemetry-proto."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def _value(any_value: Any) -> Any:
    field = any_value.WhichOneof("value")
    return getattr(any_value, field) if field else None


@attrs.frozen
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    start: int
    end: int
    attributes: dict[str, Any]
    links: tuple[str, ...]  # the span ids it links to


@attrs.define
class Receiver:
    """What the collector got: every request's raw bytes and the spans in them."""

    mode: str = "ok"  # ok, refuse (HTTP 500) or hang (never answers while the test runs)
    bodies: list[bytes] = attrs.field(factory=list)
    requests: list[ExportTraceServiceRequest] = attrs.field(factory=list)
    metric_requests: list[ExportMetricsServiceRequest] = attrs.field(factory=list)
    released: threading.Event = attrs.field(factory=threading.Event)
    url: str = ""

    def metrics(self) -> dict[str, float]:
        """Each metric's total: a counter's sum over its points, a histogram's count of readings."""
        totals: dict[str, float] = {}
        for request in list(self.metric_requests):
            for resource in request.resource_metrics:
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        if metric.HasField("sum"):
                            points: Any = metric.sum.data_points
                            value = sum(p.as_double if p.HasField("as_double") else p.as_int for p in points)
                        else:
                            value = sum(p.count for p in metric.histogram.data_points)
                        totals[metric.name] = value  # cumulative: the latest export holds the total
        return totals

    def spans(self) -> list[ReceivedSpan]:
        out = []
        for request in list(self.requests):
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        out.append(
                            ReceivedSpan(
                                span.name,
                                span.trace_id.hex(),
                                span.span_id.hex(),
                                span.parent_span_id.hex(),
                                span.start_time_unix_nano,
                                span.end_time_unix_nano,
                                {a.key: _value(a.value) for a in span.attributes},
                                tuple(link.span_id.hex() for link in span.links),
                            )
                        )
        return out


@contextmanager
def otlp_receiver(mode: str = "ok") -> Iterator[Receiver]:
    receiver = Receiver(mode)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            receiver.bodies.append(body)
            if receiver.mode == "hang":
                receiver.released.wait(60)
                return
            if receiver.mode == "refuse":
                self.send_response(500)
                self.end_headers()
                return
            if self.path == "/v1/metrics":
                metrics = ExportMetricsServiceRequest()
                metrics.ParseFromString(body)
                receiver.metric_requests.append(metrics)
                answer = ExportMetricsServiceResponse().SerializeToString()
            else:
                assert self.path == "/v1/traces", self.path
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.requests.append(request)
                answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.released.set()
        server.shutdown()
        server.server_close()
