"""How the Claude Code CLI is found and started: its binary, its argv, its environment, its unattended mode.

Everything here is pure (no process is started), so the decisions are testable on their own.

The unattended mode, decided deliberately:

- On the host (the `local` backend) the CLI runs in `acceptEdits` mode with
  `--permission-prompts none` and an allow rule for Bash (plus each MCP server handed to the
  turn). File edits inside the workspace are accepted, the shell runs the builds and tests a
  turn needs, and anything else that would ask a person (a write outside the workspace, a
  background job, web access) is refused at once instead of hanging an unattended turn. We do
  not use `bypassPermissions` there: the CLI refuses it as root unless IS_SANDBOX=1 says it
  runs in a sandbox, and on the host that would be a false statement.
- In a sandboxing backend's command (IS_SANDBOX=1 is set there, because the box, not the CLI,
  is then the boundary) the CLI runs with `bypassPermissions`; on the host only when the
  manifest's own `[agent].env` says IS_SANDBOX=1 (an operator's statement that the host is a
  disposable box), never because the engine inherited the variable.
"""

from __future__ import annotations

import enum
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath

import attrs

CLI_BIN_ENV = "CRUCIBLE_CLAUDE_BIN"
CLI_NAME = "claude"
INSTALL_HINT = (
    "install it with `npm install -g @anthropic-ai/claude-code`, "
    f"or set {CLI_BIN_ENV} to the path of its `claude` binary"
)

# Set unless the manifest's [agent].env says otherwise: an unattended loop must not have its
# agent update itself mid-run or phone home with telemetry and error reports.
QUIET_DEFAULTS: Mapping[str, str] = {
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}

# Variables a parent Claude Code session sets; inherited, they make the child believe it is
# nested inside that session (crucible itself may well be run from one).
_PARENT_SESSION_VARS = ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT")


class Unattended(enum.StrEnum):
    HOST = "host"  # acceptEdits, no prompts, Bash allowed: the local backend
    SANDBOX = "sandbox"  # bypassPermissions: the turn runs inside a sandbox that says so


@attrs.frozen
class CliLookup:
    path: Path | None
    looked_for: str  # what was searched, for the error message

    def missing_note(self) -> str:
        return f"the Claude Code CLI was not found ({self.looked_for}); {INSTALL_HINT}"


def find_cli(env: Mapping[str, str]) -> CliLookup:
    """The turn's CRUCIBLE_CLAUDE_BIN, else the engine's, else `claude` on the turn's PATH."""
    configured = env.get(CLI_BIN_ENV) or os.environ.get(CLI_BIN_ENV)
    search_path = env.get("PATH", os.defpath)
    if configured:
        if os.sep not in configured:
            found = shutil.which(configured, path=search_path)
            return CliLookup(Path(found) if found else None, f"{CLI_BIN_ENV}={configured} on PATH")
        path = Path(configured).expanduser()
        usable = path.is_file() and os.access(path, os.X_OK)
        return CliLookup(path if usable else None, f"{CLI_BIN_ENV}={configured}")
    found = shutil.which(CLI_NAME, path=search_path)
    return CliLookup(Path(found) if found else None, f"`{CLI_NAME}` on PATH")


CREDENTIAL_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
PROVIDER_SWITCHES = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY")
CREDENTIAL_HINT = (
    "no credentials for the Claude Code CLI: set ANTHROPIC_API_KEY in [agent].env or the "
    "environment, or log in once with `claude` (then `/login`)"
)


def _config_dir(env: Mapping[str, str]) -> Path:
    configured = env.get("CLAUDE_CONFIG_DIR")
    if configured:
        return Path(configured).expanduser()
    home = env.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".claude"


def _json_keys(path: Path) -> set[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    return set(data) if isinstance(data, dict) else set()


def has_credentials(env: Mapping[str, str]) -> bool:
    """Whether the CLI will find something to authenticate with (a key, a login, a cloud provider).

    A login is recognised by the files the CLI writes for it; a login held only in a system
    keychain still leaves its account record in the config file, which is what we look for.
    """
    if any(env.get(name) for name in CREDENTIAL_VARS):
        return True
    if any(env.get(name, "").lower() not in ("", "0", "false") for name in PROVIDER_SWITCHES):
        return True
    config = _config_dir(env)
    if (config / ".credentials.json").is_file():
        return True
    if "apiKeyHelper" in _json_keys(config / "settings.json"):
        return True
    home = env.get("HOME") or os.path.expanduser("~")
    for record in (config / ".claude.json", Path(home) / ".claude.json"):
        if _json_keys(record) & {"oauthAccount", "primaryApiKey"}:
            return True
    return False


def preflight_problems(env: Mapping[str, str]) -> list[str]:
    """What would stop the CLI from starting a turn in this environment, each with its fix."""
    problems = []
    cli = find_cli(env)
    if cli.path is None:
        problems.append(cli.missing_note())
    if not has_credentials(env):
        problems.append(CREDENTIAL_HINT)
    return problems


def unattended_mode(env: Mapping[str, str]) -> Unattended:
    return Unattended.SANDBOX if env.get("IS_SANDBOX") == "1" else Unattended.HOST


def permission_args(mode: Unattended, mcp_server_names: Sequence[str]) -> list[str]:
    if mode is Unattended.SANDBOX:
        return ["--permission-mode", "bypassPermissions"]
    allowed = ["Bash", *(f"mcp__{name}" for name in mcp_server_names)]
    return [
        "--permission-mode",
        "acceptEdits",
        "--permission-prompts",
        "none",
        # One comma-joined value: the option is variadic and would swallow later arguments.
        "--allowedTools",
        ",".join(allowed),
    ]


def build_argv(
    cli: PurePath,
    *,
    model: str | None,
    effort: str | None,
    mode: Unattended,
    mcp_config: PurePath | None,
    mcp_server_names: Sequence[str],
    resume: str | None,
) -> list[str]:
    """The CLI's argv. The prompt is not in it: it goes on stdin, out of `ps` and argv limits."""
    argv = [str(cli), "--print", "--output-format", "stream-json", "--verbose"]
    argv += permission_args(mode, mcp_server_names)
    if model:
        argv += ["--model", model]
    if effort:
        argv += ["--effort", effort]
    if mcp_config is not None:
        argv += ["--mcp-config", str(mcp_config)]
    if resume:
        argv += ["--resume", resume]
    return argv


def child_env(turn_env: Mapping[str, str], *, keep_sandbox_claim: bool = True) -> dict[str, str]:
    """The CLI's environment: no parent Claude session's variables, quiet defaults, and (for a
    host turn the manifest does not declare sandboxed) no inherited IS_SANDBOX claim."""
    dropped = _PARENT_SESSION_VARS if keep_sandbox_claim else (*_PARENT_SESSION_VARS, "IS_SANDBOX")
    env = {k: v for k, v in turn_env.items() if k not in dropped}
    for key, value in QUIET_DEFAULTS.items():
        env.setdefault(key, value)
    return env
