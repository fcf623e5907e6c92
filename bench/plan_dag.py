"""The plan executor on a 1,000-task DAG of trivial commands against a bare Python floor.

Ten blocks of 99 parallel `true` tasks, each block joined by one task the next block waits
on (fan-out/fan-in). The executor runs it with `jobs` tasks in flight, writing its session
log; the floor spawns the same `sh -c true` processes with the same parallelism and the same
layer barriers through a thread pool and subprocess (capturing output in a new session, as
reading a task's JSON needs), and writes nothing.

The bench process adopts orphans (`process.adopt_orphans()`, a child subreaper) as the
`crucible` command does, so the supervisor's per-child search for descendants that left the
child's group walks only the engine's own descendants, and only when one was adopted.

A second row runs the executor with that search switched off, to separate the executor's own
cost from the supervisor's; it has no target and is informative only. A third runs it with
the full /proc sweep an engine that does not adopt orphans pays (an embedding library, say).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from harness import Options, Row, median, timed

if TYPE_CHECKING:
    from crucible_core.plan.executor import PlanReport

BLOCKS = 10
QUICK_BLOCKS = 3  # `--quick`: 300 tasks
WIDTH = 99
TARGET = 1.3
REPS_CAP = 3  # each side spawns 1,000 processes per repetition
# For the up-front estimate: seconds per block (100 tasks) of one side's run. Measured on the
# shared 2-core machine (load about 12).
SECONDS_PER_BLOCK = 0.35


def plan_text(blocks: int = BLOCKS, command: str = "true") -> str:
    """The DAG as a plan file: `blocks` fan-out/fan-in blocks of WIDTH + 1 tasks running `command`."""
    lines = ["version = 1", "[budget]", "usd = 1.0", ""]
    previous: str | None = None
    for block in range(blocks):
        wide = [f"b{block}w{i}" for i in range(WIDTH)]
        for name in wide:
            deps = f'depends_on = ["{previous}"]\n' if previous else ""
            lines.append(f'[[task]]\nname = "{name}"\nkind = "command"\ncommand = "{command}"\n{deps}')
        join = f"b{block}join"
        deps = ", ".join(f'"{n}"' for n in wide)
        lines.append(
            f'[[task]]\nname = "{join}"\nkind = "command"\ncommand = "{command}"\ndepends_on = [{deps}]\n'
        )
        previous = join
    return "\n".join(lines)


def run_plan(text: str, workdir: Path, jobs: int) -> PlanReport:
    """Run a plan file's text through the executor in this process, its session log in workdir/state."""
    import tomllib

    from crucible_core.plan.executor import ExecutorConfig, PlanExecutor
    from crucible_core.plan.load import plan_from_data
    from crucible_core.plan.validate import validate
    from crucible_core.plugins import load_plugins
    from crucible_core.session_log import SessionLog

    kinds = load_plugins().registry("task kind")
    plan = validate(plan_from_data(tomllib.loads(text), kinds), kinds)
    state = workdir / "state"
    shutil.rmtree(state, ignore_errors=True)
    log = SessionLog(state / "session.jsonl")
    try:
        return PlanExecutor(plan, kinds, log, ExecutorConfig(workdir, state, jobs=jobs)).run()
    finally:
        log.close()


def run_executor(workdir: Path, jobs: int, blocks: int = BLOCKS) -> int:
    report = run_plan(plan_text(blocks), workdir, jobs)
    return sum(1 for r in report.results.values() if r.status == "pass")


def run_floor(workdir: Path, jobs: int, blocks: int = BLOCKS) -> int:
    spawned = 0

    def one(_: int) -> int:
        # What any executor must do to read a task's output: capture it, own the child's group.
        subprocess.run(
            ["sh", "-c", "true"], cwd=workdir, check=True, capture_output=True, start_new_session=True
        )
        return 1

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for _block in range(blocks):
            spawned += sum(pool.map(one, range(WIDTH)))
            spawned += one(0)
    return spawned


def _blocks(options: Options) -> int:
    return QUICK_BLOCKS if options.quick else BLOCKS


def estimate(options: Options) -> float:
    # Both sides warm up once, then each repetition runs both, then the two informative rows.
    runs = 2 + 4 * min(options.reps, REPS_CAP)
    return runs * _blocks(options) * SECONDS_PER_BLOCK


def run(options: Options) -> list[Row]:
    workdir = options.workdir / "plan_dag"
    workdir.mkdir(parents=True, exist_ok=True)
    jobs = max(2, os.cpu_count() or 2)
    blocks = _blocks(options)
    total = blocks * (WIDTH + 1)
    ours_counts, floor_counts = [], []
    ours, floor = [], []
    from crucible_core import process

    process.adopt_orphans()  # as the `crucible` command does (cli/main.py)
    run_executor(workdir, jobs, blocks)  # warm-up, untimed
    run_floor(workdir, jobs, blocks)
    for rep in range(min(options.reps, REPS_CAP)):
        sides = [("ours", run_executor), ("floor", run_floor)]
        if rep % 2:
            sides.reverse()
        for side, action in sides:
            counts = ours_counts if side == "ours" else floor_counts
            samples = ours if side == "ours" else floor
            samples.append(
                timed(lambda action=action, counts=counts: counts.append(action(workdir, jobs, blocks)))
            )
    note = f"{jobs} in flight"
    if set(ours_counts) != {total} or set(floor_counts) != {total}:
        note = (
            f"MISMATCH: passed {sorted(set(ours_counts))} vs spawned {sorted(set(floor_counts))} of {total}"
        )
    sweep_off = _without_sweep(workdir, jobs, blocks, min(options.reps, REPS_CAP))
    full_sweep = _full_sweep(workdir, jobs, blocks, min(options.reps, REPS_CAP))
    if not options.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return [
        Row(f"plan.dag  {total:,} command tasks", median(ours), median(floor), TARGET, note),
        Row("plan.dag  (supervisor sweep off)", median(sweep_off), median(floor), None, "informative"),
        Row("plan.dag  (full /proc sweep)", median(full_sweep), median(floor), None, "not adopting orphans"),
    ]


def _without_sweep(workdir: Path, jobs: int, blocks: int, reps: int) -> list[float]:
    from crucible_core import process

    saved = process.kill_marked, process._sweep_adopted
    process.kill_marked = lambda mark: 0
    process._sweep_adopted = lambda mark: None
    try:
        return [timed(lambda: run_executor(workdir, jobs, blocks)) for _ in range(reps)]
    finally:
        process.kill_marked, process._sweep_adopted = saved


def _full_sweep(workdir: Path, jobs: int, blocks: int, reps: int) -> list[float]:
    from crucible_core import process

    enabled = process._orphans.enabled
    process._orphans.enabled = False  # the kernel flag stays; the supervisor takes the old path
    try:
        return [timed(lambda: run_executor(workdir, jobs, blocks)) for _ in range(reps)]
    finally:
        process._orphans.enabled = enabled
