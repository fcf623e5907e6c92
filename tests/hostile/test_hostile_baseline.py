"""A measure that never gives a valid reading: `check` fails saying why, a run stops at its baseline.

Issue 8 (new-user report): check used to pass a measure that exits non-zero, prints a
non-numeric score or is missing, and the run then discarded every iteration and exited 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_support import run_crucible
from tests.e2e.session import assert_one_trailing_shutdown, rows

BROKEN_MEASURES = {
    # a verdict line, but a nonzero exit
    "nonzero": (
        '#!/bin/sh\necho "disk full" >&2\necho \'{"valid": true, "score": 1}\'\nexit 3\n',
        "exited 3",
    ),
    # a score that is not a number
    "text-score": ('#!/bin/sh\necho \'{"valid": true, "score": "fast"}\'\n', "not a finite number"),
    # the measure runs a program that does not exist
    "missing": ("#!/bin/sh\n./no-such-scorer.sh\n", "command not found"),
}


def break_measure(manifest: Path, kind: str) -> str:
    script, expected = BROKEN_MEASURES[kind]
    (manifest.parent / "measure.sh").write_text(script)
    return expected


@pytest.mark.parametrize("kind", sorted(BROKEN_MEASURES))
def test_check_fails_on_a_measure_that_gives_no_valid_reading(example, kind: str) -> None:
    manifest = example("counter")
    expected = break_measure(manifest, kind)
    done = run_crucible("check", "--manifest", manifest)
    assert done.returncode == 13, done.stdout
    fail = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    assert len(fail) == 1 and "no valid reading" in fail[0] and expected in fail[0], done.stdout
    assert "a run would stop at its baseline" in fail[0]
    assert not (manifest.parent / "workspace").exists()


def test_check_explains_exit_127_and_shows_the_stderr_tail(example) -> None:
    manifest = example("counter")
    manifest.write_text(
        manifest.read_text().replace('measure_cmd = "./measure.sh"', 'measure_cmd = "./gone.sh"')
    )
    done = run_crucible("check", "--manifest", manifest)
    assert done.returncode == 13
    assert "exit 127: command not found" in done.stdout
    assert "stderr:" in done.stdout and "gone.sh" in done.stdout


def test_a_run_whose_baseline_is_invalid_stops_before_any_turn(example) -> None:
    manifest = example("counter")
    break_measure(manifest, "missing")
    done = run_crucible("--manifest", manifest, "--iterations", "3")
    assert done.returncode == 4, done.stderr
    assert "the baseline measure gave no valid reading" in done.stderr
    assert "command not found" in done.stderr
    assert [r["decision"] for r in rows(manifest)] == ["invalid"]  # no agent turn was spent
    shutdown = assert_one_trailing_shutdown(manifest)
    assert "baseline" in shutdown["reason"]
    # the kept baseline commit is untouched: the workspace still holds the original value
    assert (manifest.parent / "workspace" / "value.txt").read_text().strip() == "0"
