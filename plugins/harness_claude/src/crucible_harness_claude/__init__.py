"""crucible-plugin-harness-claude: the `claude` (Claude Code CLI) and `anthropic` (SDK agent loop) harnesses, and the init templates that use them."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from crucible_core.api import Deferred, hookimpl

if TYPE_CHECKING:
    from crucible_core.api import Harness, HarnessContext, HarnessFactory, InitTemplate, Register

# Claude Code keeps skills (the toolbox) and project settings here; a restore must leave it.
SPARED = (".claude/",)


# The factories import their modules on first use: loading the plugin (every `crucible`
# command does) must not import the anthropic SDK.
def _claude_cli(ctx: HarnessContext) -> Harness:
    from crucible_harness_claude.cli_harness import ClaudeCodeHarness

    return ClaudeCodeHarness.from_context(ctx)


def _anthropic_sdk(ctx: HarnessContext) -> Harness:
    from crucible_harness_claude.sdk_harness import AnthropicHarness

    return AnthropicHarness.from_context(ctx)


@hookimpl
def crucible_register_harnesses(register: Register[HarnessFactory]) -> None:
    # takes_mcp: the CLI passes the turn's MCP servers with --mcp-config
    register(
        "claude",
        _claude_cli,
        settings="crucible_harness_claude.settings:ClaudeSettings",
        spared=SPARED,
        takes_mcp=True,
    )
    # takes_mcp: the SDK loop lists the turn's MCP servers' tools and calls them (mcp_tools.py)
    register(
        "anthropic",
        _anthropic_sdk,
        settings="crucible_harness_claude.settings:ClaudeSettings",
        spared=SPARED,
        takes_mcp=True,
    )


@hookimpl
def crucible_register_init_templates(register: Register[InitTemplate]) -> None:
    for name in ("claude", "python-speed"):  # built on first use, from templates.TEMPLATES
        register(name, Deferred(functools.partial(_template, name)))


def _template(name: str) -> InitTemplate:
    from crucible_harness_claude.templates import TEMPLATES

    return next(template for template in TEMPLATES if template.name == name)
