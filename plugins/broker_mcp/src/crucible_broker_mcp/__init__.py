"""crucible-plugin-broker-mcp: the run's broker, its standard tools, and the MCP server that serves them.

Core resolves what a run is granted and may write (the declaration and the one mediation point)
and asks `crucible_open_broker` for a broker; this plugin answers with one (broker.py) that
dispatches and records tool calls per turn. It registers the standard tools (tools.py:
request_approval, steer_inbox; distress and escalate are crucible-plugin-distress's) and the standard output kinds that are not a forge's
(kinds.py). At run start it starts the server (streamable HTTP at /mcp on 127.0.0.1, one random
bearer token per run kept 0600 in the private state directory), hands it to every turn as the
MCP server `crucible` (so the agent sees mcp__crucible__<tool>), and stops it at run end. The mcp
SDK is this plugin's dependency, not core's. Everything past registration loads on first use.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from crucible_broker_mcp.broker import Broker
    from crucible_broker_mcp.starter import Starter
    from crucible_core.api import (
        BrokerRequest,
        BrokerTool,
        OutputKindSpec,
        Register,
        RunContext,
        RunEnd,
        TurnAdditions,
        TurnContext,
    )

# Registered by name and built on first use (listing plugins builds no tool or kind); the names
# are checked against what is built by tests/broker_mcp/test_broker_registration.py.
TOOL_NAMES = ("request_approval", "steer_inbox")  # distress and escalate: crucible-plugin-distress
KIND_NAMES = ("tracker-comment", "chat-message", "image-push", "deploy", "gpu-capture")


def _tool(name: str) -> BrokerTool:
    from crucible_broker_mcp.tools import BUILTIN_TOOLS

    return next(tool for tool in BUILTIN_TOOLS if tool.name == name)


def _kind(name: str) -> OutputKindSpec:
    from crucible_broker_mcp.kinds import KINDS

    return next(kind for kind in KINDS if kind.name == name)


@hookimpl
def crucible_register_broker_tools(register: Register[BrokerTool]) -> None:
    from crucible_core.api import Deferred

    for name in TOOL_NAMES:
        register(name, Deferred(functools.partial(_tool, name)))


@hookimpl
def crucible_register_output_kinds(register: Register[OutputKindSpec]) -> None:
    from crucible_core.api import Deferred

    for name in KIND_NAMES:
        register(name, Deferred(functools.partial(_kind, name)))


class UnservedBroker:
    """The broker of a run whose agent can call no tool (most runs): none is granted, or its
    harness takes no MCP servers. Nothing is served and no call can come, so the agent is told
    what the declaration says, a turn opens nothing, and the mediation point (a `Broker`, its
    module loaded then) is opened at the first write the engine asks to make.

    A resumed run opens it at once, so the spent counts are read from the log as it was left.
    """

    def __init__(self, request: BrokerRequest) -> None:
        self.request = request
        self.opened: Broker | None = None
        if request.resumed:
            self._open()

    def _open(self) -> Broker:
        if self.opened is None:
            from crucible_broker_mcp.broker import Broker

            self.opened = Broker.open(self.request)
        return self.opened

    def prompt_text(self) -> str:
        # As `Broker.prompt_text` says it: granted tools are missing for the harness's reason.
        declaration = self.request.declaration
        return declaration.prompt_text(
            self.request.unreachable if declaration.capabilities.broker_tools else None
        )

    def open_turn(self, iteration: int) -> None:
        if self.opened is not None:
            self.opened.open_turn(iteration)

    def close_turn(self) -> None:
        if self.opened is not None:
            self.opened.close_turn()

    def admit(
        self, kind: str, target: str | None = None, *, by: str, iteration: int | None = None
    ) -> str | None:
        return self._open().admit(kind, target, by=by, iteration=iteration)


@hookimpl
def crucible_open_broker(request: BrokerRequest) -> Broker | UnservedBroker:
    if not request.declaration.capabilities.broker_tools or request.unreachable is not None:
        return UnservedBroker(request)
    from crucible_broker_mcp.broker import Broker

    return Broker.open(request)


# One server per run this process drives, keyed by run id (tests drive several runs per process).
_servers: dict[str, Starter] = {}


@hookimpl
def crucible_run_start(context: RunContext) -> None:
    broker = context.broker
    if broker is None or isinstance(broker, UnservedBroker):
        return  # no tool granted, or the agent cannot call MCP tools: nothing to serve
    from crucible_broker_mcp.broker import Broker

    if not isinstance(broker, Broker) or not broker.tools:
        return  # [agent.broker] disabled, or no tool granted: nothing to serve
    if broker.unreachable is not None:
        return  # the agent cannot call MCP tools (its harness takes none): nobody to serve
    from crucible_broker_mcp.starter import Starter

    # Importing the SDK and starting the server overlap the baseline measure; the first turn waits.
    _servers[context.run_id] = Starter.begin(broker, context.private_dir / "broker")
    # Attached now, not when the thread is done, so the first prompt already states the tools
    # (a server that then fails to start ends the run at the first turn).
    broker.attach("crucible-plugin-broker-mcp")


@hookimpl
def crucible_before_turn(context: TurnContext) -> TurnAdditions | None:
    starter = _servers.get(context.run.run_id)
    if starter is None:
        return None
    from crucible_core.api import TurnAdditions

    server = starter.wait()  # raises (ending the run) when the server could not start
    return TurnAdditions(mcp_servers={server.name: server.client_config()})


@hookimpl
def crucible_run_end(end: RunEnd) -> None:
    starter = _servers.pop(end.run.run_id, None)
    if starter is not None:
        starter.stop()
