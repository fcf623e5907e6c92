"""crucible-plugin-harness-opencode: the `opencode` harness (the OpenCode CLI on an OpenAI-speaking endpoint)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from crucible_core.api import Harness, HarnessContext, HarnessFactory, Register


# The harness module is imported on first use: loading the plugin (every `crucible` command
# does) imports only this module and the settings.
def _opencode(ctx: HarnessContext) -> Harness:
    from crucible_harness_opencode.harness import OpenCodeHarness

    return OpenCodeHarness.from_context(ctx)


@hookimpl
def crucible_register_harnesses(register: Register[HarnessFactory]) -> None:
    from crucible_harness_opencode.settings import SPARED, OpenCodeSettings

    # takes_mcp: the turn's MCP servers (the broker among them) are remote servers in opencode.json
    register("opencode", _opencode, settings=OpenCodeSettings, spared=SPARED, takes_mcp=True)
