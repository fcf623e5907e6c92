"""crucible-plugin-harness-pi: the `pi` harness (the Pi coding agent CLI on an OpenAI-speaking endpoint)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from crucible_core.api import Harness, HarnessContext, HarnessFactory, Register

# Pi keeps project skills under .agents/ (settings.SKILLS_DIR); a restore must leave it.
SPARED = (".agents/",)


# The harness module is imported on first use: loading the plugin (every `crucible` command
# does) imports only this module.
def _pi(ctx: HarnessContext) -> Harness:
    from crucible_harness_pi.harness import PiHarness

    return PiHarness.from_context(ctx)


@hookimpl
def crucible_register_harnesses(register: Register[HarnessFactory]) -> None:
    # No takes_mcp: pi has no MCP client, so a run that grants broker tools is refused (harness.py).
    register("pi", _pi, settings="crucible_harness_pi.settings:PiSettings", spared=SPARED)
