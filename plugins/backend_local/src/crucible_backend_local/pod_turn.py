"""A harness's sandbox command as one shell command, so a task runner can carry a `local` turn to a pod.

The `local` backend runs its harness on this host. When a wide round's proposals need what this
machine lacks (`[search].needs`), a task runner (the Kubernetes one) runs each proposal's turn
elsewhere, and it takes a turn only as one shell command (`ShellTurn`). A harness that can
describe its turn for a sandbox (`SandboxHarness.sandbox_command`, as the Claude Code CLI
harness does) is turned into such a command here:

- the layout is the pod's: the workdir is wherever the command starts (the runner's task
  workdir), home and the private directory live in a fresh directory under the pod's TMPDIR.
  The layout's paths are unknown on this machine, so the harness is given stand-in paths and
  the command names the real ones through shell variables;
- the command writes the harness's `files` (mode 0600), exports the harness's variables and
  runs its argv with the prompt on standard input;
- nothing of this machine's environment enters the command: the harness is asked for its
  command with an environment of its own defaults only, so neither the engine's variables nor
  `[agent].env` (API keys among them) travel. The pod's credentials and settings come from the
  deploy profile (`[tasks.env]`, `[[tasks.secret_env]]`). The turn's MCP servers stay behind
  too: they name this machine's loopback forwards and carry their bearers;
- `finish` feeds each line the command printed to the harness's stream reader before the
  harness judges the turn, so the result (cost, failure class, agent events) is what a turn
  on this host gives.
"""

from __future__ import annotations

import base64
import re
from pathlib import PurePosixPath

import attrs

from crucible_core.api import (
    Completed,
    FailureClass,
    SandboxCommand,
    SandboxHarness,
    SandboxLayout,
    ShellTurn,
    Turn,
    TurnResult,
)

# Stand-ins for the pod's paths, replaced by shell variables when the command is written. They
# hold no quote, so they survive the quoting of the words they sit in.
_WORKDIR = "/@crucible-pod:workdir@"
_HOME = "/@crucible-pod:home@"
_PRIVATE = "/@crucible-pod:private@"
# The command (files included) is written into a Job: no credential of this host may ride in it.
POD_LAYOUT = SandboxLayout(workdir=_WORKDIR, home=_HOME, private=_PRIVATE, carries_secrets=False)
_SHELL_VARS = {_WORKDIR: "crucible_work", _HOME: "crucible_home", _PRIVATE: "crucible_private"}
# The one engine variable the harness may see: where the workspace is (the pod's workdir).
_WORKSPACE_ENV = "CRUCIBLE_WORKSPACE"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def shell_word(value: str) -> str:
    """`value` as one sh word, with each stand-in path replaced by its shell variable."""
    quoted = "'" + value.replace("'", "'\\''") + "'"
    for stand_in, variable in _SHELL_VARS.items():
        quoted = quoted.replace(stand_in, f"'\"${variable}\"'")
    return quoted


def pod_command(command: SandboxCommand) -> str:
    """The sh script that lays out home and the private files, exports the env and runs argv.

    The harness's variables are set as it gives them, over the pod's own: they say where its
    layout lives and how its program runs unattended (IS_SANDBOX goes with the argv's mode).
    """
    lines = [
        "crucible_work=$(pwd)",
        'crucible_base="${TMPDIR:-/tmp}/crucible-turn.$$"',
        'crucible_home="$crucible_base/home"',
        'crucible_private="$crucible_base/private"',
        "crucible_umask=$(umask)",
        "umask 077",
        'mkdir -p "$crucible_home" "$crucible_private" || exit 97',
    ]
    for path, data in sorted(command.files.items()):
        target = shell_word(path)
        encoded = base64.b64encode(data).decode("ascii")
        lines.append(
            f'mkdir -p "$(dirname -- {target})" && printf %s {encoded} | base64 -d > {target} '
            f"&& chmod 600 {target} || exit 97"
        )
    lines.append('umask "$crucible_umask"')
    for name, value in sorted(command.env.items()):
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(f"the harness's variable {name!r} is not a variable name")
        lines.append(f"export {name}={shell_word(value)}")
    program = shell_word(command.argv[0])
    lines += [
        f"command -v {program} >/dev/null 2>&1 || "
        f"{{ echo {shell_word(f'crucible: {command.argv[0]} is not on the PATH of this pod')} >&2; "
        'rm -rf "$crucible_base"; exit 127; }',
        " ".join(shell_word(word) for word in command.argv),
        "crucible_rc=$?",
        'rm -rf "$crucible_base"',
        'exit "$crucible_rc"',
    ]
    return "\n".join(lines) + "\n"


def _outside_layout(path: str) -> bool:
    """A file path that is not under the stand-in home or private directory (or climbs out)."""
    parts = PurePosixPath(path).parts
    return ".." in parts or not any(path.startswith(root + "/") for root in (_HOME, _PRIVATE))


def sandbox_shell_turn(harness: SandboxHarness, turn: Turn) -> ShellTurn:
    """The harness's turn as one command for a pod (see the module docstring); starts nothing.

    The returned env is the turn's own (the runner forwards only the names it must, as for
    the `command` backend); the command carries nothing of it.
    """
    pod_env = {_WORKSPACE_ENV: _WORKDIR} if _WORKSPACE_ENV in turn.env else {}
    asked = attrs.evolve(turn, env=pod_env, mcp_servers={}, services=())
    described = harness.sandbox_command(asked, POD_LAYOUT)
    if isinstance(described, TurnResult):
        return _refused(turn, described)
    strays = sorted(path for path in described.files if _outside_layout(path))
    if strays:
        note = f"the harness wants files outside the pod's home and private directory: {', '.join(strays)}"
        return _refused(turn, TurnResult(False, FailureClass.SPAWN, note=note))
    command = described

    def finish(done: Completed) -> TurnResult:
        for line in done.stdout.splitlines():
            command.on_stdout_line(line)
        return command.finish(done)

    return ShellTurn(
        command=pod_command(command),
        env=dict(turn.env),
        stdin=command.stdin,
        stdin_file_env=None,
        finish=finish,
    )


def _refused(turn: Turn, result: TurnResult) -> ShellTurn:
    """A turn the harness could not describe: a command that only says so, and the harness's verdict."""
    message = f"crucible: the turn could not start: {result.note}"
    return ShellTurn(
        command=f"echo {shell_word(message)} >&2; exit 1",
        env=dict(turn.env),
        stdin=b"",
        stdin_file_env=None,
        finish=lambda _done: result,
    )
