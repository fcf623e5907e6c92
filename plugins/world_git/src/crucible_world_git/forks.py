"""Forks of a git workspace for wide rounds: `git worktree` add/remove, and a candidate as a binary patch.

The worktree shares the workspace's object store, so a fork costs one checkout and no copy
of history. What a candidate changed leaves its fork as `git diff --binary` against the
kept commit it was forked at: a self-contained file that `git apply` brings into the main
workspace, whatever the fork's own HEAD or index were made to say by the agent.

Every git call runs with hooks and the file-system monitor turned off: a candidate may have
written either into the shared repository's configuration, and neither may run in the engine.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from crucible_core import process
from crucible_core.errors import RunFailed
from crucible_core.protocols import ApplyOutcome

GIT_TIMEOUT = 600.0
# git's worktree bookkeeping is not safe to run concurrently on one repository (two `worktree
# add` read each other's half-written records; a `prune` can drop a record being written):
# forks are made from several threads at once, so that part runs one at a time.
_BOOKKEEPING = threading.Lock()
_SAFE = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.quotePath=false")
_TAIL = 400


def git_problem() -> str | None:
    if shutil.which("git") is None:
        return "the git world forks candidates with `git worktree`, and git is not on PATH"
    return None


def _env() -> dict[str, str]:
    # a GIT_DIR or GIT_INDEX_FILE of the engine's caller must not redirect a fork's operations
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env


def _git(cwd: Path, *args: str) -> process.Completed:
    return process.run(["git", *_SAFE, *args], cwd=cwd, env=_env(), timeout=GIT_TIMEOUT)


def _why(what: str, done: process.Completed) -> str:
    detail = (done.stderr.strip() or done.stdout.strip())[-_TAIL:]
    return f"{what} {done.describe_failure()}" + (f": {detail}" if detail else "")


def add_fork(workspace: Path, path: Path, commit: str) -> Path:
    """Make the worktree; the git directory git made for it (read before any agent runs there).

    Only git's bookkeeping (`worktree add --no-checkout`) holds the lock; filling the files,
    the slow part, runs in the fork alone, so several forks fill at the same time.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with _BOOKKEEPING:
        done = _git(workspace, "worktree", "add", "--detach", "--no-checkout", "--quiet", str(path), commit)
    if not done.ok:
        remove_fork(workspace, path)  # nothing half-made stays behind
        raise RunFailed(_why("git worktree add", done), hint="check the workspace repository and the disk")
    try:
        pointer = (path / ".git").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        remove_fork(workspace, path)
        raise RunFailed(f"git worktree add left no readable .git file in {path}: {exc}") from exc
    gitdir = Path(pointer.removeprefix("gitdir:").strip())
    gitdir = gitdir if gitdir.is_absolute() else (path / gitdir).resolve()
    filled = _git(path, f"--git-dir={gitdir}", f"--work-tree={path}", "reset", "--hard", "--quiet", commit)
    if not filled.ok:
        remove_fork(workspace, path)
        raise RunFailed(_why("checking out the fork", filled), hint="check the disk")
    return gitdir


def capture(path: Path, commit: str, into: Path, gitdir: Path | None = None) -> bool:
    """The fork's files against `commit`, as a binary patch in `into`; False when they are the same.

    With `gitdir` (what `add_fork` returned) git is told where the fork's repository is, so a
    candidate that rewrote its worktree's `.git` file cannot point the capture at another index.
    """
    if gitdir is not None:
        path_args = [f"--git-dir={gitdir}", f"--work-tree={path}"]
        return _capture(path, commit, into, path_args)
    return _capture(path, commit, into, [])


def _capture(path: Path, commit: str, into: Path, where: list[str]) -> bool:
    added = _git(path, *where, "add", "--all")
    if not added.ok:
        raise RunFailed(_why("git add in the candidate's worktree", added), hint="check the candidate")
    done = _git(
        path,
        *where,
        "diff",
        "--cached",
        "--binary",
        "--full-index",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--no-renames",
        f"--output={into}",
        commit,
        "--",
    )
    if not done.ok:
        raise RunFailed(_why("git diff in the candidate's worktree", done), hint="check the candidate")
    return into.stat().st_size > 0


def adopt(workspace: Path, change: Path) -> ApplyOutcome:
    done = _git(workspace, "apply", "--binary", "--whitespace=nowarn", str(change))
    if not done.ok:
        return ApplyOutcome(False, _why("git apply", done))
    return ApplyOutcome(True)


def remove_fork(workspace: Path, path: Path) -> None:
    """Remove the worktree and git's record of it; safe on a fork that was never finished.

    The files go first, outside the lock (links inside are removed, never followed); then
    `git worktree prune` drops the record of every worktree whose directory is gone.
    """
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)
    with _BOOKKEEPING:
        _git(workspace, "worktree", "prune")
