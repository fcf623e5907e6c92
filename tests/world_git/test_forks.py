"""The git World's fork seam for wide rounds, on real repositories and the real git CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from crucible_core.protocols import ForkingWorld
from crucible_search_wide.round import sweep_forks
from crucible_world_git.gitworld import GitWorld


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@x"
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def world(tmp_path: Path) -> GitWorld:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "keep.txt").write_text("same\n")
    (workspace / "gone.txt").write_text("to be deleted\n")
    (workspace / "tool.sh").write_text("#!/bin/sh\n")
    made = GitWorld.at(workspace)
    made.prepare()
    return made


def test_a_fork_captures_every_kind_of_change_and_the_main_workspace_adopts_it(
    world: GitWorld, tmp_path: Path
) -> None:
    assert isinstance(world, ForkingWorld) and world.fork_problem() is None
    token = world.snapshot("kept")
    fork = tmp_path / "state" / "forks" / "propose-1"
    world.fork(fork, token)
    (fork / "gone.txt").unlink()
    (fork / "new.bin").write_bytes(bytes(range(256)) * 4)
    (fork / "tool.sh").chmod(0o755)
    (fork / "link").symlink_to("keep.txt")
    git(fork, "-c", "core.hooksPath=/dev/null", "commit", "-qam", "the agent commits in its fork")
    (fork / "keep.txt").write_text("edited after the commit\n")
    patch = tmp_path / "1.patch"
    assert world.capture(fork, token, patch)  # against the kept commit, whatever the fork's HEAD says
    world.remove_fork(fork)
    assert not fork.exists() and git(world.memory.workspace, "worktree", "list").count("\n") == 1
    workspace = world.memory.workspace
    assert world.adopt(patch).ok
    assert not (workspace / "gone.txt").exists()
    assert (workspace / "new.bin").read_bytes() == bytes(range(256)) * 4
    assert os.access(workspace / "tool.sh", os.X_OK)
    assert os.readlink(workspace / "link") == "keep.txt"
    assert (workspace / "keep.txt").read_text() == "edited after the commit\n"
    assert sorted(world.changed_paths()) == ["gone.txt", "keep.txt", "link", "new.bin", "tool.sh"]
    world.restore(token)
    assert (workspace / "gone.txt").exists() and not (workspace / "new.bin").exists()


def test_an_unchanged_fork_captures_nothing_and_a_conflicting_patch_is_refused(
    world: GitWorld, tmp_path: Path
) -> None:
    token = world.snapshot("kept")
    fork = tmp_path / "fork"
    world.fork(fork, token)
    assert not world.capture(fork, token, tmp_path / "empty.patch")
    (fork / "keep.txt").write_text("fork\n")
    assert world.capture(fork, token, tmp_path / "p.patch")
    (world.memory.workspace / "keep.txt").write_text("main moved on\n")
    outcome = world.adopt(tmp_path / "p.patch")
    assert not outcome.ok and "git apply" in outcome.note
    world.remove_fork(fork)


def test_a_sweep_removes_half_made_and_orphaned_forks(world: GitWorld, tmp_path: Path) -> None:
    token = world.snapshot("kept")
    root = tmp_path / "forks"
    world.fork(root / "a", token)
    world.fork(root / "b", token)
    subprocess.run(["rm", "-rf", str(root / "b")], check=True)  # the directory gone, git's record left
    (root / "c").mkdir()  # a fork a kill interrupted before git made it
    assert sweep_forks(world, root) == ["a", "c"]
    assert not any(root.iterdir())
    assert git(world.memory.workspace, "worktree", "list").count("\n") == 1
    world.remove_fork(root / "never-made")  # nothing to remove is not an error


def test_a_fork_whose_git_file_is_redirected_still_captures_its_own_change(
    world: GitWorld, tmp_path: Path
) -> None:
    token = world.snapshot("kept")
    main_index = world.memory.workspace / ".git" / "index"
    before = main_index.read_bytes()
    fork = tmp_path / "fork"
    world.fork(fork, token)
    (fork / "keep.txt").write_text("the candidate's edit\n")
    # a hostile candidate points its fork's git at the main repository's git directory
    shutil.rmtree(fork / ".git")
    (fork / ".git").write_text(f"gitdir: {world.memory.workspace / '.git'}\n")
    patch = tmp_path / "p.patch"
    assert world.capture(fork, token, patch)
    assert "the candidate's edit" in patch.read_text()
    assert main_index.read_bytes() == before  # the capture staged nothing in the main repository
    world.remove_fork(fork)
    assert git(world.memory.workspace, "worktree", "list").count("\n") == 1


def test_forks_made_and_removed_from_several_threads_at_once_all_succeed(
    world: GitWorld, tmp_path: Path
) -> None:
    # git's own `worktree add` run concurrently on one repository fails now and then; the
    # world must not (a wide round forks every candidate at the same time)
    from concurrent.futures import ThreadPoolExecutor

    token = world.snapshot("kept")
    root = tmp_path / "forks"

    def cycle(n: int) -> bool:
        path = root / f"propose-{n}"
        world.fork(path, token)
        ok = (path / "keep.txt").read_text() == "same\n"
        world.remove_fork(path)
        return ok

    with ThreadPoolExecutor(max_workers=6) as pool:
        assert all(pool.map(cycle, range(24)))
    assert git(world.memory.workspace, "worktree", "list").count("\n") == 1
    assert not any(root.iterdir())
