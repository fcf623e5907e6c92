"""The acp harness's manifest keys: the [agent.acp] table (the agent command, the grant, the credentials).

Validated by crucible core's strict converter (plugin-owned settings): an unknown key, an
unknown tool family or a malformed variable name is refused with its key path, naming this
plugin. Importing this module is cheap; nothing here touches the ACP SDK.
"""

from __future__ import annotations

import re

import attrs

# The tool kinds of the Agent Client Protocol: an agent labels each tool call with one of them.
TOOL_KINDS = ("read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other")
# Not an ACP kind: the tools of the MCP servers crucible hands the session (the broker, run
# services), which are mediated again by the broker itself.
MCP_FAMILY = "mcp"
FAMILIES = (*TOOL_KINDS, MCP_FAMILY)
# What a turn may do unless the manifest says otherwise: look, edit files in the workspace,
# think, and call crucible's own tools. Running commands, fetching from the network, deleting
# and moving files are granted only by name.
DEFAULT_ALLOW = ("read", "edit", "search", "think", MCP_FAMILY)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


@attrs.frozen
class AcpTable:
    """[agent.acp]: which agent to start, what its permission requests may be granted, what it needs."""

    # The agent's argv, never run through a shell: a bare first word is looked up on the agent's PATH.
    command: tuple[str, ...]
    # Tool families (ACP tool kinds, plus "mcp") whose permission requests are granted; every
    # other request is denied. Frozen with the manifest at run start.
    allow: tuple[str, ...] = DEFAULT_ALLOW
    # Variables the agent needs to reach its model (ANTHROPIC_API_KEY, ...): each must be set and
    # non-empty in the agent's environment, or the run is refused before it starts.
    credentials: tuple[str, ...] = ()
    # The model to select in the agent's session; unset: [agent].model, else the agent's own default.
    model: str | None = None

    def __attrs_post_init__(self) -> None:
        if not self.command or not self.command[0].strip():
            raise ValueError('command must name the agent program, e.g. command = ["claude-agent-acp"]')
        if any("\0" in word for word in self.command):
            raise ValueError("command words must not contain NUL characters")
        unknown = [family for family in self.allow if family not in FAMILIES]
        if unknown:
            raise ValueError(
                f"allow names {', '.join(map(repr, unknown))}, which is not a tool family "
                f"(one of {', '.join(FAMILIES)})"
            )
        for name in self.credentials:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"credentials entry {name!r} is not an environment variable name")
        if self.model is not None and not self.model.strip():
            raise ValueError("model must not be empty (leave it out to use [agent].model)")


@attrs.frozen
class AcpSettings:
    """The acp harness's keys: everything lives in the [agent.acp] table."""

    acp: AcpTable

    def describe_resolved(self) -> list[str]:
        """What `crucible check` prints: the agent command and the grant its permission requests meet."""
        table = self.acp
        denied = [family for family in FAMILIES if family not in table.allow]
        lines = [
            f"agent command: {' '.join(table.command)} (Agent Client Protocol over stdio)",
            f"permission grant (default-deny): {', '.join(table.allow) or 'nothing'}; "
            f"denied: {', '.join(denied) or 'nothing'}",
        ]
        if table.credentials:
            lines.append(f"credentials required: {', '.join(table.credentials)}")
        return lines
