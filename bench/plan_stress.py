"""The plan executor under load: the 1,000-task DAG run again and again while busy processes compete
for every core, each run checked for a task lost or run twice.

Each run is plan_dag's DAG, every task appending one byte to a file named after it, executed in
this process while one busy-looping process per core (each bounded in time) competes for the
CPU. After each run: every task's file holds exactly one byte (it ran, and ran once), the
report and the session log's final table have one passed `task_result` per task, and the log
ends with a `finished` shutdown. Any problem is a `MISMATCH` note naming the run and the tasks.

The row's ratio is the executor's median run time against plan_dag's floor (the same spawns
from a thread pool), both measured under the same competing load; it has no target.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from harness import Options, Row, median, timed
from plan_dag import BLOCKS, SECONDS_PER_BLOCK, WIDTH, plan_text, run_floor, run_plan

RUNS = 10
QUICK_RUNS = 2
QUICK_BLOCKS = 2  # `--quick`: two runs of 200 tasks
LOAD_SLOWDOWN = 6.0  # how much slower a block runs under the competing load (for the estimate)
# Each task records that it ran: one byte appended to a file named after it (no fork in sh).
RECORD = "printf . >> ran/$CRUCIBLE_TASK"
# The competing load: a busy loop that ends by itself, whatever happens to this process.
BUSY = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


@contextlib.contextmanager
def competing_load(seconds: float, processes: int | None = None) -> Iterator[None]:
    """One busy-looping process per core (or `processes`), each ending after `seconds` at most."""
    count = processes or os.cpu_count() or 2
    busy = [subprocess.Popen([sys.executable, "-c", BUSY.format(seconds=seconds)]) for _ in range(count)]
    try:
        yield
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()


def stressed_run(workdir: Path, jobs: int, blocks: int) -> list[str]:
    """One run of the recording DAG in workdir; the problems found (none when every task ran once)."""
    from crucible_core.plan.executor import PriorRun
    from crucible_core.session_log import read_events

    ran = workdir / "ran"
    shutil.rmtree(ran, ignore_errors=True)
    ran.mkdir(parents=True)
    text = plan_text(blocks, RECORD)
    tasks = {task["name"] for task in tomllib.loads(text)["task"]}
    report = run_plan(text, workdir, jobs)
    problems: list[str] = []
    runs = {path.name: path.stat().st_size for path in ran.iterdir()}
    if missing := sorted(tasks - runs.keys()):
        problems.append(f"never ran: {', '.join(missing[:5])} ({len(missing)})")
    if twice := sorted(name for name, size in runs.items() if size != 1):
        problems.append(f"ran more than once: {', '.join(twice[:5])} ({len(twice)})")
    failed = sorted(name for name, result in report.results.items() if result.status != "pass")
    if report.results.keys() != tasks or failed:
        notes = "; ".join(
            f"{name}: {report.results[name].status} {report.results[name].note}" for name in failed[:3]
        )
        problems.append(f"report: {len(report.results)} results, not passed: {notes or 'none'}")
    log = workdir / "state" / "session.jsonl"
    recorded = Counter(event["task"] for event in read_events(log) if event["kind"] == "task_result")
    if recorded.keys() != tasks or set(recorded.values()) != {1}:
        problems.append(
            f"session log: {len(recorded)} tasks with a task_result, {sum(recorded.values())} lines"
        )
    prior = PriorRun.read(log)
    if {name for name, result in prior.results.items() if result.status == "pass"} != tasks:
        problems.append("session log: the folded table is not every task passed")
    if prior.shutdown is None or prior.shutdown.get("outcome") != "finished":
        problems.append(f"session log: shutdown {prior.shutdown and prior.shutdown.get('outcome')}")
    return problems


def _shape(options: Options) -> tuple[int, int]:
    return (QUICK_RUNS, QUICK_BLOCKS) if options.quick else (RUNS, BLOCKS)


def estimate(options: Options) -> float:
    runs, blocks = _shape(options)
    return 2 * runs * blocks * SECONDS_PER_BLOCK * LOAD_SLOWDOWN


def run(options: Options) -> list[Row]:
    from crucible_core import process

    process.adopt_orphans()  # as the `crucible` command does (cli/main.py)
    workdir = options.workdir / "plan_stress"
    jobs = max(2, os.cpu_count() or 2)
    runs, blocks = _shape(options)
    ours: list[float] = []
    floor: list[float] = []
    problems: list[str] = []
    with competing_load(estimate(options) * 4 + 60):
        for n in range(runs):
            started = time.perf_counter()
            found = stressed_run(workdir, jobs, blocks)
            ours.append(time.perf_counter() - started)  # its checks included: a few milliseconds
            floor.append(timed(lambda: run_floor(workdir, jobs, blocks)))
            problems += [f"run {n + 1}: {problem}" for problem in found]
    if not options.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    total = blocks * (WIDTH + 1)
    note = f"MISMATCH: {'; '.join(problems[:3])}" if problems else f"{runs} runs, every task ran once"
    return [Row(f"plan.dag under load  {runs} x {total:,} tasks", median(ours), median(floor), None, note)]
