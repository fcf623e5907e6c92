"""Engine overhead: the counter for 50 iterations against a bare shell loop doing the same work.

The floor is a POSIX shell script that runs the same proposer and measure commands and the
same git CLI commands (add, commit) with nothing else: the least any design of this loop can
cost. crucible's side is the real CLI, start-up included, with the headless reporter, started
the way an installed crucible starts (bytecode written, plugin index cached).
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from harness import Options, Row, compile_crucible, median, timed

# Issue 27's target: 50 iterations, start-up included, within 1.3x of the floor. `--quick` runs
# the same 50 iterations (the target is about them) with fewer repetitions.
ITERATIONS = 50
QUICK_REPS = (
    1  # `--quick`: one timed repetition (plus the untimed warm-up) keeps the quick run under 3 minutes
)
TARGET = 1.3
# For the up-front estimate: both sides' seconds per iteration, and per start of both (crucible
# and the script, with setup and the baseline measure). Measured on the shared 2-core machine
# (load about 12).
SECONDS_PER_ITERATION = 0.3
SECONDS_PER_START = 8.5
COUNTER = Path(__file__).resolve().parent.parent / "examples" / "counter"
CRUCIBLE = Path(sys.executable).parent / "crucible"

# The same subprocesses the engine starts, and the git commands a keep costs, and no more.
FLOOR = """#!/bin/sh
set -eu
mkdir -p workspace && cp value.txt bump.sh workspace/ && cp measure.sh workspace/
cd workspace
git init -q
git add -A
git -c user.name=bench -c user.email=bench@localhost commit -qm baseline
sh -c ./measure.sh > /dev/null
i=0
while [ $i -lt {iterations} ]; do
  sh -c ./bump.sh
  sh -c ./measure.sh > /dev/null
  git add -A
  git -c user.name=bench -c user.email=bench@localhost commit -qm "iteration $i"
  i=$((i + 1))
done
"""


def _fresh_copy(workdir: Path) -> Path:
    shutil.rmtree(workdir, ignore_errors=True)
    shutil.copytree(COUNTER, workdir, ignore=shutil.ignore_patterns("workspace", "state", "STEER.md"))
    return workdir


def _crucible(workdir: Path, iterations: int = ITERATIONS) -> None:
    copy = _fresh_copy(workdir)
    subprocess.run(
        [
            str(CRUCIBLE),
            "--manifest",
            str(copy / "crucible.toml"),
            "--iterations",
            str(iterations),
            "--no-early-stop",
            "--ui",
            "headless",
        ],
        check=True,
        capture_output=True,
    )


def _floor(workdir: Path, iterations: int = ITERATIONS) -> None:
    copy = _fresh_copy(workdir)
    script = copy / "floor.sh"
    script.write_text(FLOOR.format(iterations=iterations))
    subprocess.run(["sh", str(script)], cwd=copy, check=True, capture_output=True)


def _child_cpu() -> float:
    """CPU seconds (user and system) of every child this process has waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed_cpu(action: Callable[[], object], cpu: list[float]) -> float:
    """`timed(action)`, appending the CPU its children used to `cpu`: on a shared machine the wall
    times carry the load, the CPU times much less of it."""
    before = _child_cpu()
    elapsed = timed(action)
    cpu.append(_child_cpu() - before)
    return elapsed


def _reps(options: Options) -> int:
    return min(options.reps, QUICK_REPS) if options.quick else options.reps


def estimate(options: Options) -> float:
    return (_reps(options) + 1) * (ITERATIONS * SECONDS_PER_ITERATION + 2 * SECONDS_PER_START)


def run(options: Options) -> list[Row]:
    workdir = options.workdir / "engine_overhead"
    iterations = ITERATIONS
    compile_crucible()
    # An untimed round first: the plugin index and both sides' file caches are warm afterwards.
    _crucible(workdir / "crucible", 0)
    _floor(workdir / "floor", 0)
    ours, floor, ours_empty, floor_empty = [], [], [], []
    cpu: dict[str, list[float]] = {"ours": [], "floor": [], "ours_empty": [], "floor_empty": []}
    for _ in range(_reps(options)):
        # Interleaved, so drift on a noisy machine hits both sides alike.
        ours.append(_timed_cpu(lambda: _crucible(workdir / "crucible", iterations), cpu["ours"]))
        floor.append(_timed_cpu(lambda: _floor(workdir / "floor", iterations), cpu["floor"]))
        ours_empty.append(_timed_cpu(lambda: _crucible(workdir / "crucible", 0), cpu["ours_empty"]))
        floor_empty.append(_timed_cpu(lambda: _floor(workdir / "floor", 0), cpu["floor_empty"]))
    cpu_ms = {name: median(samples) * 1000 for name, samples in cpu.items()}
    if not options.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return [
        Row(
            f"engine: counter, {iterations} iterations, start-up included",
            median(ours),
            median(floor),
            target=TARGET,
            note=f"per iteration {median(ours) / iterations * 1000:.1f} ms vs {median(floor) / iterations * 1000:.1f} ms;"
            f" CPU {cpu_ms['ours']:.0f} ms vs {cpu_ms['floor']:.0f} ms ({cpu_ms['ours'] / cpu_ms['floor']:.2f}x)",
        ),
        Row(
            "engine: counter, per iteration, start-up excluded",
            (median(ours) - median(ours_empty)) / iterations,
            (median(floor) - median(floor_empty)) / iterations,
            note=f"({iterations} its - 0 its) / {iterations}",
        ),
        Row(
            "engine: start-up and baseline (0 its)",
            median(ours_empty),
            median(floor_empty),
            note=f"CPU {cpu_ms['ours_empty']:.0f} ms vs {cpu_ms['floor_empty']:.0f} ms",
        ),
    ]
