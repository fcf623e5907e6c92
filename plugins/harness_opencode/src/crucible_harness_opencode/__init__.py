"""crucible-plugin-harness-opencode: the `opencode` harness (the OpenCode CLI on an OpenAI-speaking endpoint)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from crucible_core.api import Harness, HarnessContext, HarnessFactory, Register

# OpenCode's toolbox lands where Claude Code's does (settings.SKILLS_DIR); a restore must leave it
# (and the agent's own edits to it are overwritten each turn).
SPARED = (".claude/",)


# The harness module is imported on first use: loading the plugin (every `crucible` command
# does) imports only this module.
def _opencode(ctx: HarnessContext) -> Harness:
    from crucible_harness_opencode.harness import OpenCodeHarness

    return OpenCodeHarness.from_context(ctx)


@hookimpl
def crucible_register_harnesses(register: Register[HarnessFactory]) -> None:
    # takes_mcp: the turn's MCP servers (the broker among them) are remote servers in opencode.json
    register(
        "opencode",
        _opencode,
        settings="crucible_harness_opencode.settings:OpenCodeSettings",
        spared=SPARED,
        takes_mcp=True,
    )
