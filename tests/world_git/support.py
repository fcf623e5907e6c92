"""Helpers for the world_git tests: the git CLI as the oracle, and twin clones edited in lockstep."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import attrs

from crucible_world_git.gitworld import GitWorld

GIT_ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
    "GIT_AUTHOR_NAME": "oracle",
    "GIT_AUTHOR_EMAIL": "oracle@localhost",
    "GIT_COMMITTER_NAME": "oracle",
    "GIT_COMMITTER_EMAIL": "oracle@localhost",
    "GIT_CONFIG_NOSYSTEM": "1",
}

SPARED = (".claude/", "RESULTS.md", "a/b/codegen-out/", "gen/")
# What prepare() writes for SPARED, spelled out by hand for the git side.
SPARED_EXCLUDES = "/.claude/\n/RESULTS.md\n/a/b/codegen-out/\n/gen/\n"


def git(cwd: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout


def write(root: Path, rel: str, text: str, *, mode: int | None = None) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode is not None:
        path.chmod(mode)


def symlink(root: Path, rel: str, target: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()
    path.symlink_to(target)


def worktree(root: Path) -> dict[str, tuple]:
    """Everything in a working tree outside .git: files (exec bit, bytes), links, directories."""
    state: dict[str, tuple] = {}
    for current, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        rel_dir = os.path.relpath(current, root)
        for name in dirnames + filenames:
            full = os.path.join(current, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                state[rel] = ("link", os.readlink(full))
                if name in dirnames:
                    dirnames.remove(name)
            elif stat.S_ISDIR(st.st_mode):
                state[rel] = ("dir",)
            else:
                state[rel] = ("file", bool(st.st_mode & stat.S_IXUSR), Path(full).read_bytes())
    return state


def make_base(path: Path) -> Path:
    """A small repository with nested directories, an executable, symlinks and ignore rules."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    write(path, "README.md", "hello\n")
    write(path, "src/app.py", "print('app')\n")
    write(path, "src/lib/util.py", "X = 1\n")
    write(path, "src/lib/deep/leaf.txt", "leaf\n")
    write(path, "tools/run.sh", "#!/bin/sh\necho run\n", mode=0o755)
    write(path, "docs/guide.md", "guide\n")
    write(path, "a/keep.txt", "a\n")
    write(path, ".gitignore", "*.log\nbuild/\n/cache/\n")
    write(path, "src/.gitignore", "*.tmp\n")
    symlink(path, "link-to-readme", "README.md")
    symlink(path, "link-to-src", "src")
    write(path, "forced.log", "tracked although ignored\n")
    git(path, "add", "-A")
    git(path, "add", "-f", "forced.log")
    git(path, "commit", "-q", "-m", "base")
    return path


@attrs.define
class Twin:
    """Two clones of one base: the git CLI acts on one, a GitWorld on the other, with the same edits."""

    oracle: Path
    ours: Path
    world: GitWorld

    @classmethod
    def create(cls, tmp_path: Path, base: Path | None = None) -> Twin:
        base = base or make_base(tmp_path / "base")
        oracle, ours = tmp_path / "oracle", tmp_path / "ours"
        for target in (oracle, ours):
            git(tmp_path, "clone", "-q", str(base), str(target))
        (oracle / ".git" / "info").mkdir(exist_ok=True)
        with (oracle / ".git" / "info" / "exclude").open("a") as f:
            f.write(SPARED_EXCLUDES)
        world = GitWorld.at(ours, SPARED)
        world.prepare()
        return cls(oracle, ours, world)

    def edit(self, change: Callable[[Path], object]) -> None:
        change(self.oracle)
        change(self.ours)

    def snapshot(self, label: str = "kept") -> tuple[str, str]:
        """(oracle commit, our commit) after `git add -A && git commit` and GitWorld.snapshot."""
        git(self.oracle, "add", "-A")
        git(self.oracle, "commit", "-q", "--allow-empty", "-m", label)
        return git(self.oracle, "rev-parse", "HEAD").strip(), self.world.snapshot(label)

    def restore(self, oracle_commit: str, our_commit: str) -> None:
        git(self.oracle, "reset", "-q", "--hard", oracle_commit)
        git(self.oracle, "clean", "-fdq")
        self.world.restore(our_commit)

    def assert_same(self) -> None:
        """Same HEAD tree, same index, same files on disk, and the same status as git's side."""
        assert git(self.ours, "rev-parse", "HEAD^{tree}") == git(self.oracle, "rev-parse", "HEAD^{tree}")
        assert git(self.ours, "ls-files", "-s") == git(self.oracle, "ls-files", "-s")
        assert worktree(self.ours) == worktree(self.oracle)
        # diff-files does not refresh: it fails on any entry whose stat data we recorded wrong.
        assert git(self.ours, "diff-files", "--name-status") == ""
        # --no-optional-locks keeps git from rewriting our index, so the world stays warm.
        ours = git(self.ours, "--no-optional-locks", "status", "--porcelain", "--ignored")
        assert ours == git(self.oracle, "--no-optional-locks", "status", "--porcelain", "--ignored")
