"""The executor's wall-clock ceiling, early completion, asks and the before-task hook."""

from __future__ import annotations

import json
from pathlib import Path

from tests.plan.plan_support import results, run_plan

EARLY = """
version = 1
[budget]
usd = 1.0
[[task]]
name = "look"
kind = "command"
command = "echo '{\\"complete\\": true, \\"reason\\": \\"nothing to do\\"}'"
[[task]]
name = "work"
kind = "command"
command = "touch worked"
depends_on = ["look"]
[[task]]
name = "after"
kind = "command"
command = "echo \\"$CRUCIBLE_INPUTS\\" > after.json"
stage = "epilogue"
"""


def test_early_completion_leaves_the_rest_undispatched_and_passes(tmp_path: Path) -> None:
    report, events = run_plan(tmp_path, EARLY)
    assert report.verdict == "pass" and report.reason.startswith("complete:")
    settled = results(events)
    assert "work" not in settled and settled["after"]["status"] == "pass"
    assert not (tmp_path / "ws" / "worked").exists()
    assert '"exit":"complete"' in (tmp_path / "ws" / "after.json").read_text().replace(" ", "")
    assert events[-1]["kind"] == "shutdown" and events[-1]["outcome"] == "complete"


def test_resume_after_early_completion_dispatches_nothing_more(tmp_path: Path) -> None:
    run_plan(tmp_path, EARLY)
    log = tmp_path / "state" / "session.jsonl"
    lines = log.read_text().splitlines()
    kept = [line for line in lines if json.loads(line).get("task") != "after" and "shutdown" not in line]
    log.write_text("\n".join(kept) + "\n")  # as if killed before the epilogue settled
    report, events = run_plan(tmp_path, EARLY, resume=True)
    assert report.verdict == "pass"
    assert not (tmp_path / "ws" / "worked").exists()
    assert [e["task"] for e in events if e["kind"] == "task_result"] == ["look", "after"]
    assert any(e["kind"] == "recovery" for e in events)


def test_wall_clock_ceiling_kills_in_flight_work_and_fails_the_plan(tmp_path: Path) -> None:
    plan = """
    version = 1
    [budget]
    usd = 1.0
    [[task]]
    name = "slow"
    kind = "command"
    command = "sleep 30; touch finished"
    [[task]]
    name = "next"
    kind = "command"
    command = "true"
    depends_on = ["slow"]
    """
    report, events = run_plan(tmp_path, plan, max_seconds=1.0)
    assert report.verdict == "fail" and report.reason.startswith("wall_clock")
    settled = results(events)
    assert settled["slow"]["blocked"]["reason"] == "wall_clock_ceiling"
    assert settled["next"]["blocked"]["reason"] == "wall_clock_ceiling"
    assert not (tmp_path / "ws" / "finished").exists()


def test_before_task_runs_in_each_tasks_own_root(tmp_path: Path) -> None:
    seen: list[Path] = []
    plan = """
    version = 1
    [budget]
    usd = 1.0
    [[task]]
    name = "shared"
    kind = "command"
    command = "true"
    [[task]]
    name = "isolated"
    kind = "command"
    command = "true"
    isolation = "worktree"
    """
    report, _ = run_plan(tmp_path, plan, before_task=seen.append, jobs=1)
    assert report.verdict == "pass"
    assert seen[0] == tmp_path / "ws" and len(seen) == 2 and seen[1] != tmp_path / "ws"
