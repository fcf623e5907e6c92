"""crucible-plugin-backend-local: the `local` backend (a harness on the host) and the `command` backend."""

from __future__ import annotations

from crucible_core.api import BackendFactory, Register, hookimpl


@hookimpl
def crucible_register_backends(register: Register[BackendFactory]) -> None:
    from crucible_backend_local.backends import CommandBackend, LocalBackend
    from crucible_backend_local.settings import CommandBackendSettings

    # takes_mcp: the command backend hands the turn's MCP servers over $CRUCIBLE_MCP_CONFIG
    register("command", CommandBackend.from_context, settings=CommandBackendSettings, takes_mcp=True)
    register("local", LocalBackend.from_context, runs_harness=True)
