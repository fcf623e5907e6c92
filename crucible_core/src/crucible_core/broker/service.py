"""The broker's seam: what the engine asks of a run's broker, and how it gets one.

The broker itself (tool dispatch, per-turn grants, recording each call, the one output
mediation point) and its MCP transport are crucible-plugin-broker-mcp; core resolves the
declaration (which tools and bounds a run has) and asks `crucible_open_broker` for the broker of
one run. The engine then only opens and closes turns on it, reads what the prompt says, and
asks it before a write of its own (publish-on-keep).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeAlias, runtime_checkable

import attrs

from crucible_core.broker.declaration import BROKER_DISTRIBUTION, Declaration, resolve
from crucible_core.broker.outputs import OutputKindSpec
from crucible_core.broker.tools import BrokerRuntime, BrokerTool
from crucible_core.contract import wire
from crucible_core.contract.records import value_methods
from crucible_core.errors import ManifestError, PluginError
from crucible_core.manifest.loader import LoadedManifest

SERVER_NAME = "crucible"  # the agent sees mcp__crucible__<tool>

# SessionLog.emit. Spelled as text: evaluating `wire.Event` would define every event kind, the
# rare ones a run of a command agent never writes included (contract/wire_rare.py).
Emit: TypeAlias = "Callable[[wire.Event], Any]"


@runtime_checkable
class TurnBroker(Protocol):
    """The run's broker as the engine drives it: grants open with a turn and close after it."""

    def prompt_text(self) -> str:
        """What the agent is told it has (the declaration's words, and why tools are missing)."""
        ...

    def open_turn(self, iteration: int) -> None: ...

    def close_turn(self) -> None: ...

    def admit(
        self, kind: str, target: str | None = None, *, by: str, iteration: int | None = None
    ) -> str | None:
        """Count one write of `kind` to `target` (None: the declared target) against its bound.

        Returns the address the write must use; raises OutputRefused, naming the bound, when the
        write is over its count or outside its target scope.
        """
        ...


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class BrokerRequest:
    """What `crucible_open_broker` gets: one run's resolved declaration and the engine's parts."""

    declaration: Declaration
    tools: Mapping[str, BrokerTool]  # the installed tools; the declaration says which are granted
    runtime: BrokerRuntime
    emit: Emit  # SessionLog.emit: every call, result and mediated write becomes a session event
    params: Mapping[str, str]  # the run parameters (a target bound to one admits only its value)
    session_log: Path  # a resume recounts what the recorded run already wrote from it
    resumed: bool
    # Why this run's agent cannot call MCP tools at all (its harness takes none), or None.
    unreachable: str | None = None


def installed_kinds(plugins: Any) -> dict[str, OutputKindSpec]:
    """The output-kind vocabulary the installed plugins register."""
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
    # A tool is only callable through a broker: without one (crucible-plugin-distress may still
    # register its tools) the run is granted none, and a manifest naming tools is refused here.
    served = broker_installed(plugins)
    tools = installed_tools(plugins) if served else {}
    asked = loaded.manifest.agent.broker
    if not served and asked.enabled is not False and asked.tools:
        raise ManifestError(
            f"{loaded.path}: [agent.broker].tools names {', '.join(asked.tools)}, but no installed "
            "plugin runs a broker to serve them",
            hint=f"pip install {BROKER_DISTRIBUTION}, or remove [agent.broker].tools",
        )
    for name, tool in tools.items():
        if tool.output_kind is not None and tool.output_kind not in kinds:
            raise PluginError(
                f"broker tool {name!r} writes output kind {tool.output_kind!r}, which nothing registers"
            )
    return resolve(loaded, kinds, tools, environ)


def recorded_params(events: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The run parameters a recorded run started with (its last `exposure` event): a resume keeps them."""
    params: dict[str, str] = {}
    for event in events:
        if event.get("kind") == "exposure" and isinstance(event.get("params"), dict):
            params = {str(k): str(v) for k, v in event["params"].items()}
    return params


def broker_installed(plugins: Any) -> bool:
    """Whether an installed plugin answers crucible_open_broker."""
    return bool(plugins.hook.crucible_open_broker.get_hookimpls())


def open_broker(
    plugins: Any,
    declaration: Declaration,
    engine: Any,
    *,
    resumed: bool,
    params: Mapping[str, str],
    unreachable: str | None = None,
) -> TurnBroker | None:
    """The run's broker from the plugin that provides one, or None when none is installed.

    `unreachable` says why the agent cannot call MCP tools, when it cannot.
    """
    paths = engine.paths
    runtime = BrokerRuntime(
        workspace=paths.workspace,
        distress_dir=paths.distress_dir,
        pending_steers=engine.gates.pending_steers,
        add_secret=lambda value: engine.redactor.add([value]),
    )
    request = BrokerRequest(
        declaration,
        installed_tools(plugins),
        runtime,
        engine.log.emit,
        dict(params),
        paths.session_log,
        resumed,
        unreachable,
    )
    return _answered(plugins, request)


def open_mediation(
    plugins: Any,
    declaration: Declaration,
    *,
    emit: Emit,
    workspace: Path,
    session_log: Path,
    resumed: bool,
    params: Mapping[str, str],
    why: str,
) -> TurnBroker | None:
    """A broker that only mediates the engine's own writes (a playbook's draft pull request).

    The declaration's output bounds hold as they do for a loop, but it grants no tool, and the
    agent is marked unable to reach one (`why`), so no transport starts and no turn gains a tool.
    """
    bare = attrs.evolve(declaration, capabilities=attrs.evolve(declaration.capabilities, broker_tools=()))
    runtime = BrokerRuntime(workspace=workspace, distress_dir=session_log.parent)  # no tool ever runs
    request = BrokerRequest(bare, {}, runtime, emit, dict(params), session_log, resumed, why)
    return _answered(plugins, request)


def _answered(plugins: Any, request: BrokerRequest) -> TurnBroker | None:
    brokers = plugins.call("crucible_open_broker", request=request)
    if len(brokers) > 1:
        raise PluginError(
            f"{len(brokers)} plugins answered crucible_open_broker; a run has one broker",
            hint="uninstall all but one broker plugin",
        )
    if brokers and not isinstance(brokers[0], TurnBroker):
        raise PluginError(f"crucible_open_broker returned {type(brokers[0]).__name__}, not a broker")
    return brokers[0] if brokers else None
