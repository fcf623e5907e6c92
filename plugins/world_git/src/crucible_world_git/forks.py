"""Forks of a git workspace for wide rounds: a checkout of a kept commit, and a candidate as a binary patch.

A fork is a directory holding a checkout of the kept commit and a small repository of its own
(`.git`, borrowing the workspace's objects through alternates), so the agent can use git there;
nothing in it is shared with the workspace's repository. The engine never runs git through that
repository, nor through the workspace's: each fork also gets an engine git directory
(sealed_git.py) outside the fork, which fills the checkout and later captures what
the candidate changed as `git diff --binary` against the kept commit, and `git apply` brings
that patch into the workspace through another one. So no configuration, attribute, hook or
filter the agent wrote, in its fork or in the workspace, is ever read by the engine's git, and
nothing a candidate does to its fork's `.git` changes what is captured.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from crucible_core import process
from crucible_core.errors import RunFailed
from crucible_core.protocols import ApplyOutcome
from crucible_world_git.sealed_git import environment, make_git_dir

GIT_TIMEOUT = 600.0
_TAIL = 400


def git_problem() -> str | None:
    if shutil.which("git") is None:
        return "the git world forks candidates with `git`, and git is not on PATH"
    return None


def _git(git_dir: Path, work_tree: Path, *args: str) -> process.Completed:
    env = environment(git_dir, work_tree=work_tree)
    return process.run(["git", *args], cwd=work_tree, env=env, timeout=GIT_TIMEOUT)


def _why(what: str, done: process.Completed) -> str:
    detail = (done.stderr.strip() or done.stdout.strip())[-_TAIL:]
    return f"{what} {done.describe_failure()}" + (f": {detail}" if detail else "")


def add_fork(
    path: Path, commit: str, engine_dir: Path, objects: Path, agent_objects: Path, exclude: bytes
) -> None:
    """Check `commit` out at `path` (which must not exist) through the new engine git directory `engine_dir`.

    The engine's git reads `commit` from `objects` first (the world's private record of kept
    history, out of the agent's reach, when there is one), then from `agent_objects` (the
    workspace's), which the agent's repository in the fork borrows. `exclude` is what the
    engine's git ignores besides the fork's .gitignore files (the workspace's info/exclude).
    """
    path.mkdir(parents=True)
    try:
        alternates = tuple(dict.fromkeys((objects, agent_objects)))
        make_git_dir(engine_dir, head=commit, exclude=exclude, alternates=alternates)
        filled = _git(engine_dir, path, "reset", "--hard", "--quiet", commit)
        if not filled.ok:
            raise RunFailed(_why("checking out the fork", filled), hint="check the disk")
        # The agent's own repository: the same commit, index and excludes, none of it read again.
        make_git_dir(path / ".git", head=commit, exclude=exclude, alternates=(agent_objects,))
        shutil.copyfile(engine_dir / "index", path / ".git" / "index")
    except BaseException:
        remove_fork(path, None)  # nothing half-made stays behind (the caller removes engine_dir's home)
        raise


def capture(path: Path, commit: str, into: Path, engine_dir: Path) -> bool:
    """The fork's files against `commit`, as a binary patch in `into`; False when they are the same."""
    added = _git(engine_dir, path, "add", "--all")
    if not added.ok:
        raise RunFailed(_why("git add in the candidate's worktree", added), hint="check the candidate")
    done = _git(
        engine_dir,
        path,
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


def adopt(workspace: Path, change: Path, scratch: Path | None) -> ApplyOutcome:
    """Apply the patch `change` to the workspace's files (not its index) with an engine git directory."""
    with tempfile.TemporaryDirectory(prefix="apply-", dir=scratch) as tmp:
        git_dir = make_git_dir(Path(tmp) / "git")
        done = _git(git_dir, workspace, "apply", "--binary", "--whitespace=nowarn", str(change))
    if not done.ok:
        return ApplyOutcome(False, _why("git apply", done))
    return ApplyOutcome(True)


def remove_fork(path: Path, engine_home: Path | None) -> None:
    """Remove the fork and `engine_home` (the directory holding its engine git directory).

    Safe on a fork that was never finished; links inside are removed, never followed.
    """
    if engine_home is not None:
        shutil.rmtree(engine_home, ignore_errors=True)
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)
