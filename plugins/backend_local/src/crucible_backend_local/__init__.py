"""crucible-plugin-backend-local: the `local` backend (a harness on the host) and the `command` backend."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from crucible_core.api import AgentBackend, BackendContext, BackendFactory, Register


# The factories import the backends on first use: loading the plugin (every `crucible` command
# does) imports only this module and the settings.
def _command(ctx: BackendContext) -> AgentBackend:
    from crucible_backend_local.backends import CommandBackend

    return CommandBackend.from_context(ctx)


def _local(ctx: BackendContext) -> AgentBackend:
    from crucible_backend_local.backends import LocalBackend

    return LocalBackend.from_context(ctx)


@hookimpl
def crucible_register_backends(register: Register[BackendFactory]) -> None:
    # takes_mcp: the command backend hands the turn's MCP servers over $CRUCIBLE_MCP_CONFIG, but
    # only when the manifest asks ([agent.broker]): a shell proposer never calls them, and a
    # server nobody calls costs a run about a second of CPU.
    register(
        "command",
        _command,
        settings="crucible_backend_local.settings:CommandBackendSettings",
        takes_mcp="when-asked",
    )
    register("local", _local, runs_harness=True)
