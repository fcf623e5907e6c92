"""crucible-plugin-telemetry-otlp: a run's trace and metrics, sent to an OpenTelemetry collector.

Built on the lifecycle hooks and the session-event hook alone: at run start it opens a tracer
when the standard OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) variable names a
collector, and turns each session-log event into spans (run segment, iteration, step, agent
turn, tool call, plan task, service lifetime). Without the variable it does nothing, and the
OpenTelemetry SDK is not even imported.

One run at a time per process, like the other session-log views.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from crucible_core.api import hookimpl

if TYPE_CHECKING:  # the SDK loads only when a run configured a collector
    from crucible_core.api import RunContext, RunEnd
    from crucible_telemetry_otlp.trace import RunTrace


class _Current:
    trace: RunTrace | None = None


_current = _Current()


@hookimpl
def crucible_run_start(context: RunContext) -> None:
    from crucible_telemetry_otlp.config import collector_configured

    if not collector_configured(context.engine_env):
        return
    from crucible_telemetry_otlp.trace import RunTrace

    try:
        _current.trace = RunTrace.open(context)
    except Exception as exc:  # telemetry never ends a run: say why there is none and go on
        context.note(f"telemetry: not sending this run's trace ({type(exc).__name__}: {exc})", "warn")


@hookimpl
def crucible_session_event(event: Mapping[str, Any]) -> None:
    if _current.trace is not None:
        _current.trace.event(event)


@hookimpl
def crucible_run_end(end: RunEnd) -> None:
    trace, _current.trace = _current.trace, None
    if trace is not None:
        trace.close(end)
