"""crucible-plugin-broker-mcp: serves the run's broker to agent turns as an MCP server.

At run start it starts the server (streamable HTTP at /mcp on 127.0.0.1, one random bearer
token per run kept 0600 in the private state directory), hands it to every turn as the MCP
server `crucible` (so the agent sees mcp__crucible__<tool>), and stops it at run end. The tools
themselves, their grants and the output mediation live in crucible_core.broker; this plugin is
only the wire, which is why the mcp SDK is its dependency and not core's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from crucible_broker_mcp.starter import Starter
    from crucible_core.api import RunContext, RunEnd, TurnAdditions, TurnContext

# One server per run this process drives, keyed by run id (tests drive several runs per process).
_servers: dict[str, Starter] = {}


@hookimpl
def crucible_run_start(context: RunContext) -> None:
    broker = context.broker
    if broker is None or not broker.tools:
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
