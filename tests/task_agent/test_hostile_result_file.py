"""Hostile input to an agent task: the result file a playbook's agent task writes is read only as
a regular file, so a FIFO there fails the task instead of hanging the run."""

from __future__ import annotations

from pathlib import Path

from tests.hostile.test_hostile_agent_files import finish
from tests.live_support import events, start

PLAYBOOK = """
[workflow]
type = "playbook"

[[workflow.task]]
name = "look"
kind = "agent"
prompt = "write your result"

[workspace]
dir = "workspace"

[agent]
backend = "command"
agent_cmd = "sh -c 'mkfifo PLAN_TASK_RESULT.json'"
goal = "Look."
"""


def test_a_fifo_task_result_fails_the_task_without_hanging(tmp_path: Path) -> None:
    (tmp_path / "crucible.toml").write_text(PLAYBOOK)
    proc = start(tmp_path / "crucible.toml", "--max-time", "5m", "--max-cost", "1")
    _out, err = finish(proc)
    assert proc.returncode == 4 and "internal error" not in err, err  # the playbook failed, it did not hang
    [result] = [e for e in events(tmp_path / "crucible.toml") if e["kind"] == "task_result"]
    assert (
        result["status"] == "fail" and result["note"] == "no usable PLAN_TASK_RESULT.json: not a regular file"
    )
