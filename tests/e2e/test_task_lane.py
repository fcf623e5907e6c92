"""The task lane: no [judge], every completed turn kept with a null score, exit 0 when spent."""

from __future__ import annotations

import subprocess

from tests.cli_support import run_crucible
from tests.e2e.session import assert_one_trailing_shutdown, events, rows


def test_task_lane_keeps_every_turn(example) -> None:
    manifest = example("task")
    done = run_crucible("--manifest", manifest, "--iterations", "3")
    assert done.returncode == 0, done.stderr
    got = rows(manifest)
    assert [r["decision"] for r in got] == ["baseline-skipped", "keep", "keep", "keep"]
    assert all(r["score"] is None for r in got)
    assert next(e for e in events(manifest) if e["kind"] == "start")["gate"] == "task"
    summary = next(e for e in events(manifest) if e["kind"] == "summary")
    assert summary["best_score"] is None and summary["kept"] == 3
    assert assert_one_trailing_shutdown(manifest)["outcome"] == "finished"
    workspace = manifest.parent / "workspace"
    notes = (workspace / "NOTES.md").read_text()
    assert [line for line in notes.splitlines() if line.startswith("- turn")] == [
        "- turn 1 was here",
        "- turn 2 was here",
        "- turn 3 was here",
    ]
    log = subprocess.run(["git", "-C", str(workspace), "log", "--format=%s"], capture_output=True, text=True)
    assert len([s for s in log.stdout.splitlines() if s.startswith("crucible: iteration")]) == 3


def test_check_prints_the_task_mode_notice(example) -> None:
    manifest = example("task")
    done = run_crucible("check", "--manifest", manifest)
    assert done.returncode == 0, done.stdout
    assert "TASK MODE" in done.stdout and "goal present" in done.stdout


def test_check_requires_a_goal_in_task_mode(example) -> None:
    manifest = example("task")
    manifest.write_text(
        "\n".join(line for line in manifest.read_text().splitlines() if not line.startswith("goal"))
    )
    done = run_crucible("check", "--manifest", manifest)
    assert done.returncode == 13
    assert "needs a goal" in done.stdout


def test_a_turn_that_changes_nothing_is_still_kept_in_the_task_lane(example) -> None:
    manifest = example("task")
    # the second turn finds nothing to do and leaves the workspace as it was
    (manifest.parent / "note.sh").write_text(
        '#!/bin/sh\n[ "$CRUCIBLE_ITERATION" = 2 ] && exit 0\necho "- turn $CRUCIBLE_ITERATION was here" >> NOTES.md\n'
    )
    done = run_crucible("--manifest", manifest, "--iterations", "3")
    assert done.returncode == 0, done.stderr
    got = rows(manifest)
    # the spec: every completed turn is kept; a no-change turn is no exception (it adds no commit)
    assert [r["decision"] for r in got] == ["baseline-skipped", "keep", "keep", "keep"]
    assert got[2].get("sha") is None and got[1]["sha"] and got[3]["sha"]
    summary = next(e for e in events(manifest) if e["kind"] == "summary")
    assert summary["kept"] == 3
