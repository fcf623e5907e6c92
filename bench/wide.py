"""Wide-round benchmarks: concurrent proposals against the same proposals in a row, and forks.

`wide.propose`: a domain whose scripted proposer sleeps 2 s (an I/O-bound agent turn: on a
2-core machine, sleeping proposals are what make the comparison about wall-clock rather than
CPU) runs twice with the real CLI: once with `--wide 4` (four candidates proposed at once, each
in a fork) and once as four deep iterations (the same four turns one after another). From each
session log: the wide side is the time from the `wide` phase to the last candidate's turn
(forks, turns and captures included); the serial side is the sum of the four turns. Target:
the wide round at least 3.5x faster (ratio <= 0.286).

`wide.fork`: a fork of a committed repository and its removal through the git World
(`fork` + `remove_fork`) against `git worktree add` + `git worktree remove` on the same
repository, alternating which goes first. Target: <= 1.5x.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from harness import Options, Row, median, timed
from world import SECONDS_TO_CLONE, generation_estimate, git, pristine

CANDIDATES = 4
SLEEP_S = 2.0
PROPOSE_TARGET = 1 / 3.5
FORK_TARGET = 1.5
QUICK_FORK_REPS = 2  # `--quick`: each fork and removal costs seconds on a loaded machine
# For the up-front estimate: one repetition of both proposal sides (sleeps included), and one
# fork plus its removal: git's start-ups, and per file. Measured on the shared 2-core machine
# (load about 12).
SECONDS_PER_PROPOSE_REP = 28.0
SECONDS_PER_FORK = 3.0
SECONDS_PER_FORK_FILE = 50e-6

PROPOSE = """\
import os, pathlib, time
time.sleep({sleep})
slot = os.environ.get("CRUCIBLE_CANDIDATE") or os.environ["CRUCIBLE_ITERATION"]
pathlib.Path("program.txt").write_text("cost = %d\\n" % (100 - int(slot)))
"""

MEASURE = """\
import json, pathlib, re
cost = float(re.search(r"cost = (\\S+)", pathlib.Path("program.txt").read_text()).group(1))
print(json.dumps({"valid": True, "score": cost}))
"""

MANIFEST = """\
[repo]
path = "."

[workspace]
dir = "workspace"
setup_cmd = "mkdir -p workspace && cp program.txt workspace/"
inject = ["measure.py"]

[agent]
backend = "command"
agent_cmd = "{python} {propose}"
goal = "Lower the cost."

[judge]
measure_cmd = "{python} measure.py"
direction = "lower"

[search]
approaches = {approaches}
"""


def _domain(root: Path) -> Path:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / "program.txt").write_text("cost = 100\n")
    (root / "measure.py").write_text(MEASURE)
    (root / "propose.py").write_text(PROPOSE.format(sleep=SLEEP_S))
    approaches = json.dumps([f"approach {n}" for n in range(1, CANDIDATES + 1)])
    manifest = root / "crucible.toml"
    manifest.write_text(
        MANIFEST.format(python=sys.executable, propose=root / "propose.py", approaches=approaches)
    )
    return manifest


def _events(manifest: Path) -> list[dict[str, object]]:
    lines = (manifest.parent / "state" / "session.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _crucible(*args: str) -> None:
    crucible = Path(sys.executable).parent / "crucible"
    subprocess.run([str(crucible), *args], check=True, capture_output=True, timeout=600)


def _wide_seconds(root: Path) -> float:
    manifest = _domain(root)
    _crucible("--manifest", str(manifest), "--iterations", "0", "--wide", str(CANDIDATES))
    events = _events(manifest)
    start = next(float(e["ts"]) for e in events if e["kind"] == "phase" and e["phase"] == "wide")  # type: ignore[arg-type]
    turns = [float(e["ts"]) for e in events if e["kind"] == "turn"]  # type: ignore[arg-type]
    assert len(turns) == CANDIDATES, turns
    return max(turns) - start


def _serial_seconds(root: Path) -> float:
    manifest = _domain(root)
    _crucible("--manifest", str(manifest), "--iterations", str(CANDIDATES))
    events = _events(manifest)
    total, began = 0.0, None
    for event in events:
        if event["kind"] == "agent_start":
            began = float(event["ts"])  # type: ignore[arg-type]
        elif event["kind"] == "turn" and began is not None:
            total += float(event["ts"]) - began  # type: ignore[arg-type]
            began = None
    return total


def _propose_reps(options: Options) -> int:
    # each repetition is ~10 s of sleeping agents: at most 3, one with --quick
    return 1 if options.quick else max(1, min(options.reps, 3))


def estimate(options: Options) -> float:
    # A pristine repository not cached counts here and in world's estimate, though generated once.
    forks = sum(
        generation_estimate(options.workdir / "world", files)
        + files * SECONDS_TO_CLONE
        + 2 * (_fork_reps(options) + 1) * (SECONDS_PER_FORK + files * SECONDS_PER_FORK_FILE)
        for files in options.files
    )
    return forks + _propose_reps(options) * SECONDS_PER_PROPOSE_REP


def _propose_row(options: Options) -> Row:
    base = options.workdir / "wide"
    wide: list[float] = []
    serial: list[float] = []
    for rep in range(_propose_reps(options)):
        order = (_wide_seconds, _serial_seconds) if rep % 2 == 0 else (_serial_seconds, _wide_seconds)
        for side in order:
            (wide if side is _wide_seconds else serial).append(side(base / side.__name__))
    return Row(
        f"wide.propose  {CANDIDATES} x {SLEEP_S:g} s turns",
        median(wide),
        median(serial),
        PROPOSE_TARGET,
        "crucible: concurrent wide round; baseline: the same turns one after another",
    )


def _fork_rows(options: Options) -> list[Row]:
    return [_fork_row(options, files) for files in options.files]


def _fork_reps(options: Options) -> int:
    return min(options.reps, QUICK_FORK_REPS) if options.quick else options.reps


def _fork_row(options: Options, files: int) -> Row:
    from crucible_world_git.gitworld import GitWorld

    source = pristine(options.workdir / "world", files)
    repo = options.workdir / "wide" / f"repo-{files}"
    shutil.rmtree(repo, ignore_errors=True)
    git(source.parent, "clone", "-q", str(source), str(repo))
    git(repo, "config", "gc.auto", "0")
    head = git(repo, "rev-parse", "HEAD")
    world = GitWorld.at(repo)
    ours_path = options.workdir / "wide" / f"fork-ours-{files}"
    git_path = options.workdir / "wide" / f"fork-git-{files}"

    def ours() -> None:
        world.fork(ours_path, head)
        world.remove_fork(ours_path)

    def plain() -> None:
        git(repo, "worktree", "add", "--detach", "--quiet", str(git_path), head)
        git(repo, "worktree", "remove", "--force", str(git_path))

    ours_s: list[float] = []
    git_s: list[float] = []
    for rep in range(_fork_reps(options) + 1):
        sides = ((ours_s, ours), (git_s, plain))
        for samples, action in sides if rep % 2 else sides[::-1]:
            elapsed = timed(action)
            if rep:
                samples.append(elapsed)
    leftover = git(repo, "worktree", "list", "--porcelain").count("worktree ")
    note = "" if leftover == 1 else f"MISMATCH: {leftover - 1} worktree(s) left behind"
    if not options.keep:
        shutil.rmtree(repo, ignore_errors=True)
    return Row(
        f"wide.fork  {files:,} files (create+remove)", median(ours_s), median(git_s), FORK_TARGET, note
    )


def run(options: Options) -> list[Row]:
    return [*_fork_rows(options), _propose_row(options)]
