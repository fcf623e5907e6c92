"""World benchmark: GitWorld snapshot/restore against the git CLI doing the same on a twin repository.

For each size, one pristine repository is generated with the git CLI (files spread 100 to a
directory) and cloned twice. Every repetition applies the same edit to both clones, then times
`git add -A && git commit` against GitWorld.snapshot, and, after dirtying both the same way,
`git reset --hard <kept> && git clean -fd` against GitWorld.restore. Both sides run in this
process's machine at the same moment, and sides alternate which goes first.

Rows: warm operations (a world that has already run an iteration, as in a running engine) with
the targets, and the cold first snapshot of a fresh world (what a resumed engine pays once).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
from harness import Options, Row, median, timed

if TYPE_CHECKING:
    from crucible_world_git.gitworld import GitWorld

SNAPSHOT_TARGET = {20_000: 2.0}
RESTORE_TARGET = {20_000: 2.0}
LARGE_TARGET = 2.5  # any size above 20,000 files
FILES_PER_DIR = 100
EDITED = 10
ADDED = 5
SPARED = (".claude/", "RESULTS.md")
_GENERATED = "bench-complete"  # the marker of a finished pristine repository
# For the up-front estimate: per file, generating the pristine repository (once; it is
# cached), cloning it and one repetition of the three races; per repetition and per size, the
# git commands' own start-up. Measured on the shared 2-core machine (load about 12).
SECONDS_TO_GENERATE = 400e-6
SECONDS_TO_CLONE = 100e-6
SECONDS_PER_REP = 55e-6
SECONDS_PER_REP_FIXED = 3.0
SECONDS_FIXED = 8.0

_GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=_GIT_ENV, check=True, capture_output=True)
    return done.stdout.decode().strip()


def _target(table: dict[int, float], files: int) -> float:
    return table.get(files, LARGE_TARGET if files > 20_000 else 2.0)


def pristine(workdir: Path, files: int) -> Path:
    """A committed repository of `files` small text files, generated once and reused."""
    repo = workdir / f"pristine-{files}"
    marker = repo / ".git" / _GENERATED
    if marker.exists():
        return repo
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    # The big commit below would start a detached auto-gc that repacks while the clones read
    # the repository, and `git clone` then exits 128 on a fresh machine: no housekeeping here.
    git(repo, "config", "gc.auto", "0")
    git(repo, "config", "maintenance.auto", "false")
    dirs = max(1, files // FILES_PER_DIR)
    for n in range(files):
        directory = repo / f"d{n % dirs:04d}"
        if n < dirs:
            directory.mkdir()
        lines = "".join(f"line {k} of file {n}\n" for k in range(3 + n % 20))
        (directory / f"f{n // dirs:04d}.txt").write_text(lines)
    (repo / ".gitignore").write_text("*.log\nbuild/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "pristine")
    marker.write_text("ok\n")
    return repo


def clone(source: Path, target: Path) -> Path:
    shutil.rmtree(target, ignore_errors=True)
    git(source.parent, "clone", "-q", "--no-hardlinks", str(source), str(target))
    # Auto-gc would repack in the middle of a timed commit: off on both sides.
    git(target, "config", "gc.auto", "0")
    git(target, "config", "core.fsmonitor", "false")
    return target


def edit(repo: Path, files: int, rep: int, tag: str) -> None:
    """Change EDITED tracked files and add ADDED new ones, the same way in every clone."""
    dirs = max(1, files // FILES_PER_DIR)
    per_dir = max(1, files // dirs)
    for i in range(EDITED):
        k = (rep * EDITED + i) * 7919
        path = repo / f"d{k % dirs:04d}" / f"f{(k // dirs) % per_dir:04d}.txt"
        with path.open("a") as f:
            f.write(f"{tag} {rep} {i}\n")
    for i in range(ADDED):
        (repo / f"d{(rep * ADDED + i) % dirs:04d}" / f"{tag}-{rep}-{i}.txt").write_text(f"{tag} {rep} {i}\n")


def dirty(repo: Path, files: int, rep: int) -> None:
    """Edit tracked files and drop untracked files and nested untracked directories around."""
    edit(repo, files, rep, "dirty")
    dirs = max(1, files // FILES_PER_DIR)
    for i in range(ADDED):
        nested = repo / f"d{(rep * ADDED + i + 3) % dirs:04d}" / f"scratch-{rep}-{i}" / "deeper"
        nested.mkdir(parents=True)
        (nested / "out.txt").write_text("scratch\n")


@attrs.define
class Twin:
    """The git CLI's clone and crucible's clone of one pristine repository, edited in lockstep."""

    files: int
    git_side: Path
    ours: Path
    world: GitWorld

    def git_snapshot(self, label: str) -> None:
        git(self.git_side, "add", "-A")
        git(self.git_side, "commit", "-q", "-m", label)

    def git_restore(self, kept: str) -> None:
        git(self.git_side, "reset", "-q", "--hard", kept)
        git(self.git_side, "clean", "-fdq")


def race(
    rep: int,
    first: tuple[list[float], Callable[[], object]],
    second: tuple[list[float], Callable[[], object]],
) -> None:
    """Time both sides back to back, alternating which goes first; repetition 0 only warms up."""
    for samples, action in (first, second) if rep % 2 else (second, first):
        elapsed = timed(action)
        if rep:
            samples.append(elapsed)


def generation_estimate(workdir: Path, files: int) -> float:
    """Seconds to generate the pristine repository of this size, 0 when it is cached."""
    cached = (workdir / f"pristine-{files}" / ".git" / _GENERATED).exists()
    return 0.0 if cached else files * SECONDS_TO_GENERATE


def estimate(options: Options) -> float:
    base = options.workdir / "world"
    return sum(
        generation_estimate(base, files)
        + files * (2 * SECONDS_TO_CLONE + (options.reps + 1) * SECONDS_PER_REP)
        + (options.reps + 1) * SECONDS_PER_REP_FIXED
        + SECONDS_FIXED
        for files in options.files
    )


def run(options: Options) -> list[Row]:
    rows: list[Row] = []
    base = options.workdir / "world"
    for files in options.files:
        rows += _run_size(options, base, files)
    return rows


def _run_size(options: Options, base: Path, files: int) -> list[Row]:
    from crucible_world_git.gitworld import GitWorld

    source = pristine(base, files)
    twin = Twin(
        files,
        clone(source, base / f"git-{files}"),
        clone(source, base / f"crucible-{files}"),
        # With its private record of kept commits, as the engine runs it.
        GitWorld.at(base / f"crucible-{files}", SPARED, record=base / f"record-{files}"),
    )
    git(twin.git_side, "status", "--porcelain")  # git refreshes its index once, as prepare() does ours
    twin.world.prepare()

    snap: tuple[list[float], list[float]] = ([], [])
    rest: tuple[list[float], list[float]] = ([], [])
    cold: tuple[list[float], list[float]] = ([], [])
    for rep in range(options.reps + 1):
        label = f"bench {rep}"
        edit(twin.git_side, files, rep, "keep")
        edit(twin.ours, files, rep, "keep")
        race(
            rep, (snap[0], partial(twin.world.snapshot, label)), (snap[1], partial(twin.git_snapshot, label))
        )

        kept_git = git(twin.git_side, "rev-parse", "HEAD")
        kept_ours = twin.world.last_commit_sha() or ""
        dirty(twin.git_side, files, rep)
        dirty(twin.ours, files, rep)
        race(
            rep,
            (rest[0], partial(twin.world.restore, kept_ours)),
            (rest[1], partial(twin.git_restore, kept_git)),
        )

        # A world that has never seen this workspace, as after an engine restart.
        edit(twin.git_side, files, rep, "cold")
        edit(twin.ours, files, rep, "cold")
        fresh = GitWorld.at(twin.ours, SPARED, record=base / f"record-{files}")
        race(rep, (cold[0], partial(fresh.snapshot, label)), (cold[1], partial(twin.git_snapshot, label)))
        fresh.memory.close()
        twin.world.restore(fresh.last_commit_sha() or "")  # the warm world catches up with that commit

    note = _compare(twin.git_side, twin.ours)
    size = f"{files:,} files"
    rows = [
        Row(
            f"world.snapshot  {size}", median(snap[0]), median(snap[1]), _target(SNAPSHOT_TARGET, files), note
        ),
        Row(
            f"world.restore   {size}", median(rest[0]), median(rest[1]), _target(RESTORE_TARGET, files), note
        ),
        Row(f"world.snapshot  {size} (cold)", median(cold[0]), median(cold[1]), None, note),
    ]
    twin.world.memory.close()
    if not options.keep:
        shutil.rmtree(twin.git_side, ignore_errors=True)
        shutil.rmtree(twin.ours, ignore_errors=True)
    return rows


def _compare(git_side: Path, ours: Path) -> str:
    """Both sides must have reached the same tree, index and clean status, or the timing means nothing."""
    problems = []
    if git(git_side, "rev-parse", "HEAD^{tree}") != git(ours, "rev-parse", "HEAD^{tree}"):
        problems.append("trees differ")
    if git(git_side, "ls-files", "-s") != git(ours, "ls-files", "-s"):
        problems.append("indexes differ")
    if git(ours, "status", "--porcelain"):
        problems.append("crucible side not clean")
    return "MISMATCH: " + ", ".join(problems) if problems else ""
