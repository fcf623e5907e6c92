"""A harness's sandbox command run on this host: the same command a sandbox or a pod runs, in a home of its own.

The opencode and pi harnesses describe every turn as one command (`SandboxHarness`), because
the seed step must run where the key is. On the `local` backend that command runs here: its
layout is the workspace plus a fresh private directory (mode 0700, outside the workspace and
the run's state) holding the turn's home and its 0600 files (configs that may carry an MCP
bearer), removed when the turn ends. Nothing the CLI writes for itself outlives the turn, and
nothing lands in the user's home. The directory's name carries the engine's pid, so the
directory of a turn whose engine was killed (SIGKILL: no cleanup ran) is removed at the next
turn of any engine on this host.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from crucible_core.api import FailureClass, SandboxCommand, SandboxLayout, Turn, TurnResult, run_process
from crucible_harness_endpoint.cli_lookup import AgentCli
from crucible_harness_endpoint.endpoint import credential_problem

# A harness's turn for a layout, with the CLI to run there: its command, or why it cannot run.
Describe = Callable[[Turn, SandboxLayout, str], SandboxCommand | TurnResult]


def preflight_problems(cli: AgentCli, env: Mapping[str, str]) -> list[str]:
    """What would stop a turn on this host from starting (the CLI, a key), each with its fix."""
    problems = []
    if cli.find(env) is None:
        problems.append(cli.missing_note(env))
    credentials = credential_problem(env)
    if credentials:
        problems.append(credentials)
    return problems


def _write_private(base: Path, path: str, data: bytes) -> None:
    """One of the command's files, 0600, only ever under the turn's own directory."""
    target = Path(path)
    if ".." in target.parts or not target.is_relative_to(base):
        raise ValueError(f"{path} is not under the turn's directory {base}")
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: theirs to clean up
    return True


def sweep_orphans(prefix: str, root: Path | None = None) -> list[Path]:
    """Remove the turn directories `prefix` names whose engine is gone; return them.

    Only real directories this user owns are touched (never a link someone put in /tmp).
    """
    removed = []
    for path in (root or Path(tempfile.gettempdir())).glob(f"{prefix}*"):
        pid = path.name[len(prefix) :].split("-", 1)[0]
        try:
            info = path.lstat()
        except OSError:
            continue
        if not (pid.isdigit() and stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()):
            continue
        if not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def run_on_host(cli: AgentCli, describe: Describe, turn: Turn, *, prefix: str) -> TurnResult:
    """Describe the turn for a layout on this host, run it under the supervisor, and judge it.

    A turn whose CLI is missing or whose environment holds no key is refused before anything starts.
    """
    program = cli.find(turn.env)
    if program is None:
        return TurnResult(False, FailureClass.SPAWN, note=cli.missing_note(turn.env))
    credentials = credential_problem(turn.env)
    if credentials:
        return TurnResult(False, FailureClass.SPAWN, note=credentials)
    sweep_orphans(prefix)
    base = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))  # mode 0700
    try:
        layout = SandboxLayout(
            workdir=str(turn.workspace), home=str(base / "home"), private=str(base / "private")
        )
        for folder in (layout.home, layout.private):
            os.mkdir(folder, 0o700)
        command = describe(turn, layout, str(program))
        if isinstance(command, TurnResult):
            return command
        try:
            for path, data in command.files.items():
                _write_private(base, path, data)
        except (OSError, ValueError) as exc:
            return TurnResult(False, FailureClass.SPAWN, note=f"could not lay out the turn's files: {exc}")
        done = run_process(
            list(command.argv),
            cwd=turn.workspace,
            env=command.env,
            timeout=turn.deadline_seconds,
            stdin_data=command.stdin,
            on_stdout_line=command.on_stdout_line,
        )
        result: TurnResult = command.finish(done)
        return result
    finally:
        shutil.rmtree(base, ignore_errors=True)
