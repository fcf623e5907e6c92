"""The broker as the engine owns it: tool dispatch, per-turn grants, recording, and the mediator.

A transport (the MCP server of crucible-plugin-broker-mcp) calls `list_tools` and `call`; it
never decides anything. Every call and its result become session events (redacted by the
session log); a tool the current turn is not granted, or a call while no turn runs, is
refused; a tool that raises returns an error and the broker stays up.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from crucible_core.broker.declaration import Declaration, resolve
from crucible_core.broker.mediation import Mediator, OutputRefused
from crucible_core.broker.outputs import OutputKindSpec
from crucible_core.broker.tools import BrokerRuntime, BrokerTool, ToolCall, ToolError
from crucible_core.contract import wire
from crucible_core.errors import PluginError
from crucible_core.manifest.loader import LoadedManifest

# What a session event keeps of a call's arguments and result: evidence, not a transcript.
RECORDED_CHARS = 2000
SERVER_NAME = "crucible"  # the agent sees mcp__crucible__<tool>

Emit = Callable[[wire.Event], Any]  # SessionLog.emit


@attrs.frozen
class ToolOutcome:
    ok: bool
    result: Mapping[str, Any] | None = None
    error: str | None = None


def installed_kinds(plugins: Any) -> dict[str, OutputKindSpec]:
    """The output-kind vocabulary the installed plugins register (core registers the built-in one)."""
    kinds = {}
    for entry in plugins.registry("output kind"):
        if not isinstance(entry.value, OutputKindSpec):
            raise PluginError(
                f"plugin {entry.plugin} registered output kind {entry.name!r} without an OutputKindSpec"
            )
        if entry.value.name != entry.name:
            raise PluginError(
                f"plugin {entry.plugin} registered output kind {entry.name!r} under another name"
            )
        kinds[entry.name] = entry.value
    return kinds


def installed_tools(plugins: Any) -> dict[str, BrokerTool]:
    tools = {}
    for entry in plugins.registry("broker tool"):
        if not isinstance(entry.value, BrokerTool) or entry.value.name != entry.name:
            raise PluginError(
                f"plugin {entry.plugin} registered broker tool {entry.name!r} without a matching BrokerTool"
            )
        tools[entry.name] = entry.value
    return tools


def declaration_for(
    plugins: Any, loaded: LoadedManifest, environ: Mapping[str, str] | None = None
) -> Declaration:
    """Resolve a manifest against the installed vocabulary and tools (no pack content runs)."""
    kinds = installed_kinds(plugins)
    tools = installed_tools(plugins)
    for name, tool in tools.items():
        if tool.output_kind is not None and tool.output_kind not in kinds:
            raise PluginError(
                f"broker tool {name!r} writes output kind {tool.output_kind!r}, which nothing registers"
            )
    return resolve(loaded, kinds, tools, environ)


def _bounded(value: Any) -> Any:
    text = json.dumps(value, default=str, ensure_ascii=False)
    if len(text) <= RECORDED_CHARS:
        return value
    return text[:RECORDED_CHARS] + f"... ({len(text)} chars)"


class Broker:
    """One run's broker. Thread-safe: the transport calls from its own thread(s)."""

    def __init__(
        self,
        declaration: Declaration,
        tools: Mapping[str, BrokerTool],
        runtime: BrokerRuntime,
        mediator: Mediator,
        emit: Emit,
    ) -> None:
        self.declaration = declaration
        self.tools = {name: tools[name] for name in declaration.capabilities.broker_tools}
        self.runtime = runtime
        self.mediator = mediator
        self._emit = emit
        self._lock = threading.Lock()
        self._turn: int | None = None
        self.served_by: str | None = None  # the transport serving the tools, once one attached
        # Why this run's agent cannot call MCP tools at all (its harness takes no MCP servers),
        # or None. A transport starts no server then: nobody would call it.
        self.unreachable: str | None = None

    # -- the engine's side ------------------------------------------------------------------
    def attach(self, transport: str) -> None:
        """A transport (the MCP server) serves these tools from now on."""
        self.served_by = transport

    def detach(self) -> None:
        self.served_by = None

    def prompt_text(self) -> str:
        """What the agent is told it has: the same declaration check and exposure print."""
        lines = self.declaration.describe()
        missing = None
        if self.tools and self.unreachable is not None:
            missing = self.unreachable
        elif self.tools and self.served_by is None:
            missing = "no broker transport plugin is installed"
        if missing is not None:
            lines = [
                f"  broker tools: none ({missing})" if line.startswith("  broker tools:") else line
                for line in lines
            ]
        lines.append(
            "A write outside these bounds is refused and recorded; it does not end the run. "
            "Bounds cannot be changed from inside the run."
        )
        return "\n".join(lines)

    def open_turn(self, iteration: int) -> None:
        with self._lock:
            self._turn = iteration

    def close_turn(self) -> None:
        with self._lock:
            self._turn = None

    # -- the transport's side ---------------------------------------------------------------
    def list_tools(self) -> list[BrokerTool]:
        """The tools granted to the running turn (none between turns)."""
        with self._lock:
            return list(self.tools.values()) if self._turn is not None else []

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> ToolOutcome:
        with self._lock:
            iteration = self._turn
        arguments = dict(arguments or {})
        self._emit(wire.BrokerCall(tool=name, iter=iteration, arguments=_bounded(arguments)))
        outcome = self._dispatch(name, arguments, iteration)
        self._emit(
            wire.BrokerResult(
                tool=name,
                iter=iteration,
                ok=outcome.ok,
                result=_bounded(outcome.result) if outcome.result is not None else None,
                error=outcome.error,
            )
        )
        return outcome

    def _dispatch(self, name: str, arguments: Mapping[str, Any], iteration: int | None) -> ToolOutcome:
        tool = self.tools.get(name)
        if iteration is None:
            return ToolOutcome(False, error=f"refused: no agent turn is running, so {name} is not granted")
        if tool is None:
            granted = ", ".join(sorted(self.tools)) or "none"
            return ToolOutcome(
                False, error=f"refused: tool {name!r} is not granted to this turn (granted: {granted})"
            )
        call = ToolCall(tool, arguments, iteration, self.runtime, self.mediator.admit)
        try:
            result: object = tool.handler(call)  # a plugin may break its declared return type
        except OutputRefused as exc:
            return ToolOutcome(False, error=exc.render())
        except ToolError as exc:
            return ToolOutcome(False, error=exc.render())
        except Exception as exc:  # a tool bug costs its call, never the broker or the run
            return ToolOutcome(False, error=f"tool {name} failed: {type(exc).__name__}: {exc}")
        if not isinstance(result, Mapping):
            return ToolOutcome(
                False, error=f"tool {name} returned {type(result).__name__}, not a JSON object"
            )
        return ToolOutcome(True, result=dict(result))


def recorded_params(events: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The run parameters a recorded run started with (its last `exposure` event): a resume keeps them."""
    params: dict[str, str] = {}
    for event in events:
        if event.get("kind") == "exposure" and isinstance(event.get("params"), dict):
            params = {str(k): str(v) for k, v in event["params"].items()}
    return params


def build_broker(
    plugins: Any,
    declaration: Declaration,
    engine: Any,
    *,
    resumed: bool,
    params: Mapping[str, str],
    unreachable: str | None = None,
) -> Broker:
    """The run's broker over the engine's session log, markers and inbox; a resume keeps the counts.

    `unreachable` says why the agent cannot call MCP tools, when it cannot.
    """
    from crucible_core.broker.mediation import used_counts
    from crucible_core.session_log import read_events

    paths = engine.paths
    used = used_counts(read_events(paths.session_log)) if resumed else {}
    mediator = Mediator(declaration.outputs, engine.log.emit, params=params, used=used)
    runtime = BrokerRuntime(
        workspace=paths.workspace,
        distress_dir=paths.distress_dir,
        pending_steers=engine.gates.pending_steers,
        add_secret=lambda value: engine.redactor.add([value]),
    )
    broker = Broker(declaration, installed_tools(plugins), runtime, mediator, engine.log.emit)
    broker.unreachable = unreachable
    return broker
