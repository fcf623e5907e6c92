"""How an ACP agent is found and started: its command, its environment, its own home, what `check` verifies.

Pure apart from looking the command up on a PATH, so each decision is testable on its own.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import attrs

from crucible_harness_acp.settings import AcpTable

# Set unless [agent].env says otherwise: an unattended turn must not have its agent update
# itself or report telemetry. The generic switch (DO_NOT_TRACK) and those of the agents most
# often run through ACP (the Claude agent SDK, npm's update notifier).
QUIET_DEFAULTS: Mapping[str, str] = {
    "DO_NOT_TRACK": "1",
    "NO_UPDATE_NOTIFIER": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}
# Variables a parent Claude Code session sets; inherited, they make a Claude-based agent
# believe it is nested inside that session (crucible may well be run from one).
_PARENT_SESSION_VARS = ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT")
# Says "a sandbox is the boundary" to Claude-based agents, which then offer to skip their
# permission prompts (and claude-agent-acp fails to open a session as root). On the host it is
# never true of the turn, whatever container the engine itself runs in; [agent].env may still set it.
_SANDBOX_CLAIM = "IS_SANDBOX"
# Each turn gets a home of its own, so nothing the agent writes lands in the user's: these
# variables point into it unless [agent].env names them.
HOME_DIRS: Mapping[str, str] = {
    "HOME": "",
    "XDG_CONFIG_HOME": ".config",
    "XDG_DATA_HOME": ".local/share",
    "XDG_STATE_HOME": ".local/state",
    "XDG_CACHE_HOME": ".cache",
}


def home_env(home: str, keep: Collection[str]) -> dict[str, str]:
    """The home variables of a turn whose home is `home`, except those [agent].env sets itself."""
    return {name: f"{home}/{sub}" if sub else home for name, sub in HOME_DIRS.items() if name not in keep}


def child_env(
    turn_env: Mapping[str, str], home: Mapping[str, str], manifest_env: Collection[str]
) -> dict[str, str]:
    """The agent's environment: the turn's, its own home, quiet defaults; inherited claims dropped.

    `manifest_env` names the variables the manifest's [agent].env sets: those are kept as written.
    """
    dropped = (*_PARENT_SESSION_VARS, _SANDBOX_CLAIM)
    env = {k: v for k, v in turn_env.items() if k not in dropped or k in manifest_env}
    env.update(home)
    for key, value in QUIET_DEFAULTS.items():
        env.setdefault(key, value)
    return env


@attrs.frozen
class CommandLookup:
    argv: tuple[str, ...] | None  # the command with its program resolved, or None: not found
    looked_for: str

    def missing_note(self) -> str:
        return (
            f"the ACP agent was not found ({self.looked_for}): install it, "
            "or set [agent.acp].command to its path"
        )


def find_command(command: Sequence[str], env: Mapping[str, str], manifest_dir: Path) -> CommandLookup:
    """The agent's argv with its program found: a bare name on the agent's PATH, a relative path
    from the manifest's directory."""
    program = command[0]
    if os.sep not in program:
        found = shutil.which(program, path=env.get("PATH", os.defpath))
        argv = (found, *command[1:]) if found else None
        return CommandLookup(argv, f"`{program}` on the agent's PATH")
    path = (manifest_dir / program).resolve() if not os.path.isabs(program) else Path(program)
    usable = path.is_file() and os.access(path, os.X_OK)
    return CommandLookup((str(path), *command[1:]) if usable else None, f"{path} (an executable file)")


def missing_credentials(table: AcpTable, env: Mapping[str, str]) -> list[str]:
    return [
        f"[agent.acp].credentials names {name}, which is not set for the agent: "
        f"set it in [agent].env or crucible's environment"
        for name in table.credentials
        if not env.get(name)
    ]


def preflight_problems(table: AcpTable, env: Mapping[str, str], manifest_dir: Path) -> list[str]:
    """What would stop a turn from starting here, each with its fix."""
    lookup = find_command(table.command, env, manifest_dir)
    problems = [] if lookup.argv is not None else [lookup.missing_note()]
    return problems + missing_credentials(table, env)
