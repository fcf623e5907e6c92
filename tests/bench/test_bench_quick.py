"""`python3 tasks.py bench --quick`: every benchmark has a quick variant, the run says how long it
will take before it starts, reports each benchmark's rows as they finish, and prints ratio rows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import run  # bench/run.py
from harness import QUICK_FILES, QUICK_REPS, Options


def test_quick_runs_a_benchmark_and_prints_ratio_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run.main(["--quick", "--reps", "1", "--only", "resume_fold", "--workdir", str(tmp_path)])
    out, err = capsys.readouterr()
    # said before it started, then each finished row as it came
    assert re.search(r"^estimated \d+ s on a 2-core machine \(resume_fold \d+ s\)$", err, re.M), err
    assert err.index("estimated") < err.index("[1/1] resume_fold")
    assert re.search(
        r"^    resume: fold 10,000 rows vs bare json parse: \d+\.\d\dx  (ok|OVER)$", err, re.M
    ), err
    # the table: the quick size, a ratio against the floor measured in the same run, its target
    assert "median of 1 repetitions per row" in out  # --reps still chooses under --quick
    assert re.search(r"^resume: fold 10,000 rows vs bare json parse .* \d+\.\d\dx +<= 2\.0x", out, re.M), out


def test_every_benchmark_has_a_quick_variant_and_an_estimate(tmp_path: Path) -> None:
    full = Options(workdir=tmp_path)
    quick = Options(files=QUICK_FILES, reps=QUICK_REPS, workdir=tmp_path, quick=True)
    estimates = {
        name: (run.load(name).estimate(quick), run.load(name).estimate(full)) for name in run.BENCHMARKS
    }
    assert all(0 < fast < slow for fast, slow in estimates.values()), estimates
    # The per-unit costs were measured with the machine shared (load about 13), where the quick
    # run took 3.4 minutes for 56 s of CPU: a quick run estimated past 4 minutes there would
    # not finish in 3 on a quiet machine.
    assert sum(fast for fast, _ in estimates.values()) < 240, estimates
