"""One run's trace: session-log events become OpenTelemetry spans, sent by a bounded batch exporter.

The trace id is derived from the run id, so every segment of a resumed run lands in one trace;
each segment is a root span linked to the segment before it (its span id is kept in the run's
private directory). Span times are the events' own timestamps. Every string attribute passes
through a redactor loaded with the engine's secrets, on top of the session log's own redaction.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from opentelemetry import trace as otel_trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Link, Span, SpanContext, TraceFlags

from crucible_core.api import Redactor
from crucible_telemetry_otlp import config
from crucible_telemetry_otlp.metrics import RunMetrics

if TYPE_CHECKING:
    from crucible_core.api import RunContext, RunEnd

SEGMENT_FILE = "telemetry_otlp/segment"  # under the run's private directory: the last segment's span id
_NANOS = 1_000_000_000
NAME_CHARS = 128
VALUE_CHARS = 1024


def trace_id_of(run_id: str) -> int:
    """A 128-bit trace id that is the same for every segment of one run."""
    digest = hashlib.sha256(f"crucible-run:{run_id}".encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1


class _RunIds(RandomIdGenerator):
    def __init__(self, trace_id: int) -> None:
        self._trace_id = trace_id

    def generate_trace_id(self) -> int:
        return self._trace_id


class _Counted(SpanExporter):
    """Forwards to the OTLP exporter and counts the spans a collector actually took."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:  # an exporter's failure is a dropped batch, never the run's problem
            return SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self.exported += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class _Ended(SpanProcessor):
    """Counts the spans that ended, so the ones never exported can be reported."""

    def __init__(self) -> None:
        self.count = 0

    def on_end(self, span: ReadableSpan) -> None:
        self.count += 1


def _nanos(event: Mapping[str, Any]) -> int:
    ts = event.get("ts")
    return int(ts * _NANOS) if isinstance(ts, int | float) and not isinstance(ts, bool) else time.time_ns()


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@attrs.define
class RunTrace:
    """The open spans of one run segment and the provider that exports them."""

    provider: TracerProvider
    tracer: otel_trace.Tracer
    exporter: _Counted
    ended: _Ended
    redactor: Redactor
    root: Span
    note: Any
    endpoint: str
    metrics: RunMetrics | None = None
    measure_started: int | None = None  # when the open step began, while it is a measure
    lock: threading.Lock = attrs.field(factory=threading.Lock)
    iteration: Span | None = None
    step: Span | None = None
    turn: Span | None = None
    tools: dict[str, list[Span]] = attrs.field(factory=dict)
    services: dict[str, Span] = attrs.field(factory=dict)
    totals: dict[str, float] = attrs.field(factory=dict)

    @classmethod
    def open(cls, context: RunContext) -> RunTrace:
        trace_id = trace_id_of(context.run_id)
        exporter = _Counted(
            OTLPSpanExporter(
                endpoint=config.traces_endpoint(context.engine_env), timeout=config.EXPORT_TIMEOUT_SECONDS
            )
        )
        ended = _Ended()
        resource = Resource.create({"service.name": "crucible", "crucible.run_id": context.run_id})
        provider = TracerProvider(
            resource=resource,
            id_generator=_RunIds(trace_id),
            shutdown_on_exit=False,  # run end shuts it down, bounded; an exit must never wait on a collector
        )
        provider.add_span_processor(ended)
        provider.add_span_processor(
            BatchSpanProcessor(
                exporter,
                max_queue_size=config.QUEUE_SPANS,
                max_export_batch_size=config.BATCH_SPANS,
                schedule_delay_millis=config.SCHEDULE_MILLIS,
                export_timeout_millis=int(config.EXPORT_TIMEOUT_SECONDS * 1000),
            )
        )
        tracer = provider.get_tracer("crucible")
        redactor = Redactor()
        redactor.add_engine_env(context.engine_env)
        segment_file = context.private_dir / SEGMENT_FILE
        links = []
        previous = _previous_segment(segment_file)
        if context.resumed and previous is not None:
            links.append(
                Link(
                    SpanContext(
                        trace_id, previous, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
                    )
                )
            )
        root = tracer.start_span(
            "crucible run",
            context=otel_trace.set_span_in_context(otel_trace.INVALID_SPAN),
            links=links,
            attributes={
                "crucible.run_id": redactor.text(context.run_id),
                "crucible.resumed": context.resumed,
                "crucible.lane": context.lane,
            },
        )
        try:
            segment_file.parent.mkdir(parents=True, exist_ok=True)
            segment_file.write_text(f"{root.get_span_context().span_id:016x}\n")
        except OSError:
            pass  # a resume then starts an unlinked segment; the trace id still joins them
        endpoint = config.traces_endpoint(context.engine_env)
        metrics_endpoint = config.metrics_endpoint(context.engine_env)
        metrics = RunMetrics(metrics_endpoint, resource) if metrics_endpoint else None
        return cls(provider, tracer, exporter, ended, redactor, root, context.note, endpoint, metrics)

    def _attrs(self, values: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in values.items():
            if value is None:
                continue
            if isinstance(value, str):
                out[key] = self.redactor.text(value)[:VALUE_CHARS]
            elif isinstance(value, bool | int | float):
                out[key] = value
            else:
                out[key] = self.redactor.text(str(value))[:VALUE_CHARS]
        return out

    def _start(self, name: str, parent: Span | None, at: int, values: Mapping[str, Any]) -> Span:
        context = otel_trace.set_span_in_context(parent or self.root)
        shown = self.redactor.text(name)[:NAME_CHARS]  # a tool's or task's name is agent- or plan-written
        return self.tracer.start_span(shown, context=context, start_time=at, attributes=self._attrs(values))

    def _add(self, key: str, amount: float, kind: str = "") -> None:
        self.totals[key] = self.totals.get(key, 0.0) + amount
        if self.metrics is None or amount < 0:
            return
        if key == "cost_usd":
            self.metrics.cost.add(amount)
        elif key == "tokens":
            self.metrics.tokens.add(amount, {"crucible.token_type": kind})
        elif key == "iterations":
            self.metrics.iterations.add(amount)
        elif key == "keeps":
            self.metrics.keeps.add(amount)

    def _end_step(self, at: int) -> None:
        if self.step is not None:
            self.step.end(end_time=at)
            self.step = None
        if self.measure_started is not None:
            seconds = max(0, at - self.measure_started) / _NANOS
            self._add("measure_secs", seconds)
            if self.metrics is not None:
                self.metrics.measure_time.record(seconds)
            self.measure_started = None

    def _end_iteration(self, at: int) -> None:
        self._end_turn(at)
        self._end_step(at)
        if self.iteration is not None:
            self.iteration.end(end_time=at)
            self.iteration = None

    def _end_turn(self, at: int) -> None:
        for spans in self.tools.values():
            for span in spans:
                span.end(end_time=at)
        self.tools.clear()
        if self.turn is not None:
            self.turn.end(end_time=at)
            self.turn = None

    def event(self, event: Mapping[str, Any]) -> None:
        with self.lock:
            self._event(event, _nanos(event), event.get("kind"))

    def _event(self, event: Mapping[str, Any], at: int, kind: Any) -> None:
        if kind == "phase" and event.get("phase") in ("baseline", "iteration"):
            self._end_iteration(at)
            number = _int(event.get("iter")) or 0
            name = "baseline" if event.get("phase") == "baseline" else "iteration"
            self.iteration = self._start(name, self.root, at, {"crucible.iter": number})
            self._add("iterations", 1 if name == "iteration" else 0)
        elif kind == "step":
            self._end_step(at)
            step = str(event.get("step") or "")
            self.measure_started = at if step == "measure" else None
            self.step = self._start(
                step, self.iteration, at, {"crucible.step": step, "crucible.iter": event.get("iter")}
            )
        elif kind == "agent_start":
            self._end_turn(at)
            self.turn = self._start(
                "agent turn", self.step or self.iteration, at, {"crucible.iter": event.get("iter")}
            )
        elif kind == "turn":
            cost = event.get("cost")
            if isinstance(cost, int | float):
                self._add("cost_usd", float(cost))
            span = self.turn or self._start("agent turn", self.step or self.iteration, at, {})
            span.set_attributes(
                self._attrs(
                    {
                        "crucible.iter": event.get("iter"),
                        "crucible.ok": event.get("ok"),
                        "crucible.failure": event.get("failure"),
                        "crucible.cost_usd": cost,
                        "crucible.note": event.get("note"),
                    }
                )
            )
            self.turn = span
            self._end_turn(at)
        elif kind == "tokens":
            for kind_of_token in ("input", "output", "cache_read", "cache_write"):
                count = _int(event.get(kind_of_token))
                if count and count > 0:
                    self._add("tokens", count, kind_of_token)
        elif kind == "broker_call":
            tool = str(event.get("tool") or "")
            span = self._start(
                f"tool {tool}",
                self.turn or self.step or self.iteration,
                at,
                {"crucible.tool": tool, "crucible.iter": event.get("iter")},
            )
            self.tools.setdefault(tool, []).append(span)
        elif kind == "broker_result":
            tool = str(event.get("tool") or "")
            waiting = self.tools.get(tool) or []
            span = (
                waiting.pop(0)
                if waiting
                else self._start(f"tool {tool}", self.turn or self.iteration, at, {"crucible.tool": tool})
            )
            span.set_attributes(
                self._attrs({"crucible.ok": event.get("ok"), "crucible.error": event.get("error")})
            )
            span.end(end_time=at)
        elif kind == "row":
            self._row(event, at)
        elif kind == "task_result":
            span = self._start(
                f"task {event.get('task')}",
                self.iteration,
                at,
                {
                    "crucible.task": event.get("task"),
                    "crucible.task_kind": event.get("task_kind"),
                    "crucible.status": event.get("status"),
                    "crucible.attempts": event.get("attempts"),
                    "crucible.cost_usd": event.get("cost_usd"),
                    "crucible.metric": event.get("metric"),
                    "crucible.iter": event.get("iter"),
                },
            )
            span.end(end_time=at)
        elif kind == "service_start":
            name = str(event.get("service") or "")
            self.services[name] = self._start(
                f"service {name}",
                self.root,
                at,
                {"crucible.service": name, "crucible.attempt": event.get("attempt")},
            )
        elif kind == "service_exit":
            ending = self.services.pop(str(event.get("service") or ""), None)
            if ending is not None:
                ending.set_attributes(
                    self._attrs({"crucible.status": event.get("status"), "crucible.how": event.get("how")})
                )
                ending.end(end_time=at)

    def _row(self, event: Mapping[str, Any], at: int) -> None:
        row = event.get("row")
        if not isinstance(row, Mapping):
            return
        samples = row.get("samples")
        values = {
            "crucible.iter": row.get("iter"),
            "crucible.decision": row.get("decision"),
            "crucible.score": row.get("score"),
            "crucible.valid": row.get("valid"),
            "crucible.note": row.get("note"),
            "crucible.repeats": len(samples) if isinstance(samples, list) and samples else None,
        }
        if row.get("decision") == "keep":
            self._add("keeps", 1)
        if self.step is not None:
            self.step.set_attributes(self._attrs(values))
        if self.iteration is None:
            self.iteration = self._start("iteration", self.root, at, {})
        self.iteration.set_attributes(self._attrs(values))
        self._end_iteration(at)

    def close(self, end: RunEnd) -> None:
        """End every open span, then give the exporter a bounded moment to send the last batch."""
        at = time.time_ns()
        with self.lock:
            self._end_iteration(at)
            for span in self.services.values():
                span.end(end_time=at)
            self.services.clear()
            totals = {f"crucible.total.{k}": v for k, v in sorted(self.totals.items())}
            self.root.set_attributes(
                self._attrs(
                    {
                        "crucible.outcome": end.outcome,
                        "crucible.reason": end.reason,
                        "crucible.iterations": end.iterations,
                        **totals,
                    }
                )
            )
            self.root.end(end_time=at)
        # Both providers stop side by side on daemon threads: the run waits SHUTDOWN_SECONDS at
        # most, and a collector that still hangs after that is left behind with its last batch.
        stops = [self.provider.shutdown] + ([self.metrics.shutdown] if self.metrics is not None else [])
        stoppers = [threading.Thread(target=stop, name="telemetry-shutdown", daemon=True) for stop in stops]
        for stopper in stoppers:
            stopper.start()
        deadline = time.monotonic() + config.SHUTDOWN_SECONDS
        for stopper in stoppers:
            stopper.join(max(0.0, deadline - time.monotonic()))
        dropped = self.ended.count - self.exporter.exported
        if dropped > 0:
            self.note(
                f"telemetry: {dropped} of {self.ended.count} spans did not reach the collector at "
                f"{self.redactor.text(self.endpoint)}; check that it is running (the run is unaffected)",
                "warn",
            )


def _previous_segment(path: Path) -> int | None:
    try:
        return int(path.read_text().strip(), 16) or None
    except (OSError, ValueError):
        return None
