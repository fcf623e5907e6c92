"""Where a turn runs on this host: a fixed shell command, or a harness (an agent program) in the workspace."""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path

import attrs

from crucible_core.api import (
    ENV_MCP_CONFIG,
    BackendContext,
    Completed,
    FailureClass,
    Harness,
    ManifestError,
    SandboxHarness,
    ShellTurn,
    Turn,
    TurnResult,
    mcp_config_file,
    run_process,
)

PROMPT_FILE_ENV = "CRUCIBLE_PROMPT_FILE"

# A first word that the shell itself handles (a builtin or a keyword): nothing to look up.
_SHELL_WORDS = frozenset(
    [
        ":",
        ".",
        "!",
        "{",
        "(",
        "[",
        "alias",
        "bg",
        "break",
        "case",
        "cd",
        "command",
        "continue",
        "echo",
        "eval",
        "exec",
        "exit",
        "export",
        "false",
        "fg",
        "for",
        "getopts",
        "hash",
        "if",
        "jobs",
        "kill",
        "printf",
        "pwd",
        "read",
        "readonly",
        "return",
        "set",
        "shift",
        "source",
        "test",
        "time",
        "times",
        "trap",
        "true",
        "type",
        "ulimit",
        "umask",
        "unset",
        "until",
        "wait",
        "while",
    ]
)


def command_program_problems(agent_cmd: str, env: Mapping[str, str], workspace: Path | None) -> list[str]:
    """Whether agent_cmd's program exists: on the agent's PATH, or (a path) in the workspace."""
    try:
        words = shlex.split(agent_cmd)
    except ValueError:
        return []  # unusual quoting: let sh judge it when the turn runs
    if not words or words[0] in _SHELL_WORDS or any(c in words[0] for c in "=;&|$`()<>"):
        return []
    program = words[0]
    if os.sep not in program:
        if shutil.which(program, path=env.get("PATH", os.defpath)) is None:
            return [
                f"[agent].agent_cmd runs {program!r}, which is not on the agent's PATH: install it or name it by path"
            ]
        return []
    path = Path(program).expanduser()
    if not path.is_absolute():
        if workspace is None or not workspace.is_dir():
            return []  # relative to a workspace that does not exist yet (a check before setup)
        path = workspace / path
    if not path.is_file():
        return [
            f"[agent].agent_cmd runs {program!r}, which does not exist in the workspace: "
            "commit it to the repository or add it to [workspace].inject"
        ]
    if not os.access(path, os.X_OK):
        return [f"[agent].agent_cmd runs {program!r}, which is not executable: chmod +x it"]
    return []


def _tail(text: str, lines: int = 3) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


@attrs.frozen
class CommandBackend:
    """Runs [agent].agent_cmd via `sh -c` in the workspace: a deterministic, free proposer.

    The rendered prompt is in the file named by CRUCIBLE_PROMPT_FILE (and on stdin), so a
    scripted proposer can read its goal, status and steering like an agent would. The turn's
    MCP servers (the broker) are in the config file named by CRUCIBLE_MCP_CONFIG, when it has any.
    """

    agent_cmd: str

    @classmethod
    def from_context(cls, ctx: BackendContext) -> CommandBackend:
        settings = ctx.settings
        if settings is None or not settings.agent_cmd:
            raise ManifestError('[agent].agent_cmd is required when backend = "command"')
        return cls(settings.agent_cmd)

    def preflight(self, env: Mapping[str, str], workspace: Path | None) -> list[str]:
        return command_program_problems(self.agent_cmd, env, workspace)

    def shell_turn(self, turn: Turn) -> ShellTurn:
        """The turn as agent_cmd under `sh -c`, the prompt on stdin and in $CRUCIBLE_PROMPT_FILE.

        A wide round whose proposals run elsewhere (a cluster Job) carries this command out
        there; `run_turn` carries it out here.
        """
        return ShellTurn(
            command=self.agent_cmd,
            env=dict(turn.env),
            stdin=turn.prompt.encode("utf-8"),
            stdin_file_env=PROMPT_FILE_ENV,
            finish=_turn_result,
        )

    def run_turn(self, turn: Turn) -> TurnResult:
        shell_turn = self.shell_turn(turn)
        with mcp_config_file(turn.mcp_servers) as mcp_config:
            env = dict(shell_turn.env)
            if mcp_config is not None:
                env[ENV_MCP_CONFIG] = str(mcp_config)
            done = run_process(
                shell_turn.command,
                cwd=turn.workspace,
                env=env,
                timeout=turn.deadline_seconds,
                stdin_data=shell_turn.stdin,
                on_stdout_line=lambda line: turn.emit("agent_text", {"text": line}) if line.strip() else None,
            )
        return shell_turn.finish(done)


def _turn_result(done: Completed) -> TurnResult:
    """What agent_cmd's exit says about the turn, wherever it ran."""
    if done.spawn_error:
        return TurnResult(False, FailureClass.SPAWN, note=done.describe_failure())
    if done.timed_out:
        return TurnResult(False, FailureClass.TIMEOUT, note=done.describe_failure())
    if done.exit_code != 0:
        detail = _tail(done.stderr) or "no stderr"
        return TurnResult(False, FailureClass.COMMAND, note=f"agent_cmd {done.describe_failure()}: {detail}")
    return TurnResult(True, note="agent_cmd finished")


@attrs.frozen
class LocalBackend:
    """Runs the selected harness directly on this host, in the workspace, with [agent].env.

    Nothing is sandboxed: the agent has the engine user's file system and network. The
    judge stays out of reach only because it is re-copied from outside the workspace
    (frozen injects) before every measure.
    """

    harness: Harness

    @classmethod
    def from_context(cls, ctx: BackendContext) -> LocalBackend:
        harness = ctx.resolve_harness(ctx.harness_name)
        if isinstance(harness, SandboxHarness):
            return SendableLocalBackend(harness)
        return cls(harness)

    def preflight(self, env: Mapping[str, str], workspace: Path | None) -> list[str]:
        check = getattr(self.harness, "preflight", None)
        return list(check(env)) if check is not None else []

    def run_turn(self, turn: Turn) -> TurnResult:
        return self.harness.run(turn)


@attrs.frozen
class SendableLocalBackend(LocalBackend):
    """The `local` backend over a harness that can describe its turn as a command (`SandboxHarness`).

    Here its turns run as for any harness; it is also a `ShellTurnBackend`, so a wide round whose
    proposals need what this machine lacks can send each turn to a task runner's pod
    (pod_turn.py). A harness without `sandbox_command` gets the plain `LocalBackend`, which a
    run sending its turns elsewhere refuses at start.
    """

    def shell_turn(self, turn: Turn) -> ShellTurn:
        """The turn as one command for a pod: the harness's sandbox command, this machine's env left out."""
        assert isinstance(self.harness, SandboxHarness)  # from_context chose this class for it
        from crucible_backend_local.pod_turn import sandbox_shell_turn  # only a sandboxed harness's turn

        return sandbox_shell_turn(self.harness, turn)
