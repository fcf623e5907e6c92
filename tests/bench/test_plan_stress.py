"""The plan executor under a competing CPU load: every task of a fan-out/fan-in DAG runs exactly once
and the final tables (the report, the session log's task results and shutdown) are complete.

The suite runs a small version (one run of 200 tasks); the full stress, ten runs of the
1,000-task DAG, is the bench's `plan_stress` row (`python3 tasks.py bench --only plan_stress`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from plan_stress import competing_load  # bench/plan_stress.py

from tests.bench.conftest import BENCH

RUNS = 1
BLOCKS = 2

# The runs happen in an engine process of their own that adopts orphans, as the `crucible`
# command does (a subreaper for the rest of its life, which the test process must not become).
ENGINE = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from crucible_core import process
from plan_stress import stressed_run
assert process.adopt_orphans()
problems = [stressed_run(Path(sys.argv[2]), 2, int(sys.argv[3])) for _ in range(int(sys.argv[4]))]
print(json.dumps(problems))
"""


def test_every_task_runs_once_under_a_competing_load(tmp_path: Path) -> None:
    with competing_load(seconds=240):
        done = subprocess.run(
            [sys.executable, "-c", ENGINE, str(BENCH), str(tmp_path), str(BLOCKS), str(RUNS)],
            capture_output=True,
            text=True,
            timeout=240,
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[]] * RUNS
