"""crucible-plugin-harness-codex: the `codex` harness, OpenAI's Codex CLI (`codex exec --json`).

Only the registration lives here; the harness loads when a run first builds it, so listing
plugins or `crucible --help` never imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from crucible_core.api import Harness, HarnessContext, HarnessFactory, Register


def _codex_cli(ctx: HarnessContext) -> Harness:
    from crucible_harness_codex.cli_harness import CodexHarness

    return CodexHarness.from_context(ctx)


@hookimpl
def crucible_register_harnesses(register: Register[HarnessFactory]) -> None:
    # takes_mcp: the turn's MCP servers (the broker among them) go into the CLI's config.toml
    register("codex", _codex_cli, settings="crucible_harness_codex.settings:CodexSettings", takes_mcp=True)
