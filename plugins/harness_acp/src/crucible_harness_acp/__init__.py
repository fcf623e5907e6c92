"""crucible-plugin-harness-acp: the `acp` harness, any agent speaking the Agent Client Protocol over stdio."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from crucible_core.api import Harness, HarnessContext, HarnessFactory, Register


# The factory imports its module on first use: loading the plugin (every `crucible` command
# does) must not import the harness, and the ACP SDK is only ever imported by the driver process.
def _acp(ctx: HarnessContext) -> Harness:
    from crucible_harness_acp.harness import AcpHarness

    return AcpHarness.from_context(ctx)


@hookimpl
def crucible_register_harnesses(register: Register[HarnessFactory]) -> None:
    # takes_mcp: the turn's MCP servers are passed at session creation (session/new)
    register("acp", _acp, settings="crucible_harness_acp.settings:AcpSettings", takes_mcp=True)
