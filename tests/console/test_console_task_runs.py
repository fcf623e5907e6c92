"""The console on a playbook's and a plan's events: a line per settled task, the verdict at the end.

Fed the real log of examples/playbook (tests/conftest.py runs it) and of a plan file, event by
event as a run hands them to its reporters.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from crucible_core.reporters.console import ConsoleReporter, HeadlessReporter
from tests.cli_support import crucible_in_process

FIXTURES = Path(__file__).resolve().parents[1] / "flow" / "fixtures"
PLAN = """
version = 1
[budget]
usd = 1.0
[[task]]
name = "build"
kind = "command"
command = "echo '{\\"cost_usd\\": 0.25}'"
[[task]]
name = "test"
kind = "command"
command = "printf '\\\\033[2J\\\\033]0;pwned\\\\007three failed\\\\n' >&2; exit 1"
depends_on = ["build"]
[[task]]
name = "report"
kind = "command"
command = "echo '{}'"
depends_on = ["test"]
"""


def events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def plain_console(log_events: list[dict[str, Any]], reporter: type[ConsoleReporter] = ConsoleReporter) -> str:
    out = io.StringIO()
    console = reporter(out, None)
    for event in log_events:
        console.on_event(event)
    console.close()
    return out.getvalue()


def test_a_playbook_prints_each_task_as_it_settles_and_its_verdict(finished_playbook: Path) -> None:
    text = plain_console(events(finished_playbook.parent / "state" / "session.jsonl"))
    lines = text.splitlines()
    assert "world" not in lines[0]  # a playbook has no World
    assert lines[1].endswith("playbook: 6 task(s) admitted")
    tasks = [line.split("] ", 1)[1] for line in lines[2:8]]
    assert [t.split()[:3] for t in tasks] == [
        ["task", name, "pass"] for name in ("seed", "scan", "gate", "report", "summarize", "notify")
    ]
    assert tasks[0].endswith('out {"seeded":2}') and "[epilogue] [advisory]" in tasks[5]
    assert lines[8].startswith("playbook valid: 6 tasks: 6 pass; $0.0000 spent; ")
    assert lines[9] == "run ended: finished (passed: every required task passed)"
    assert "best" not in text and "kept" not in text


def test_a_plan_prints_its_failure_and_headless_one_line(tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text(PLAN)
    (tmp_path / "ws").mkdir()
    assert (
        crucible_in_process("plan", "run", tmp_path / "plan.toml", "--workspace", tmp_path / "ws").exit_code
        == 4
    )
    log = events(tmp_path / "state" / "session.jsonl")
    text = plain_console(log)
    assert "\x1b" not in text and "\x07" not in text
    assert [line.split("] ", 1)[1].split()[:3] for line in text.splitlines()[1:4]] == [
        ["task", "build", "pass"],
        ["task", "test", "fail"],
        ["task", "report", "blocked"],
    ]
    assert "exited 1: three failed" in text
    assert text.splitlines()[-2] == "plan fail: 3 tasks: 1 pass, 1 fail, 1 blocked; $0.2500 spent"  # no clock
    assert plain_console(log, HeadlessReporter) == (
        "run ended: error (failed: required task(s) did not pass: test, report); "
        "plan fail: 3 tasks: 1 pass, 1 fail, 1 blocked; $0.2500 spent\n"
    )


def test_a_scored_workflow_prints_no_task_lines() -> None:
    """Its graph's task results belong to its iterations: the loop's console is unchanged."""
    text = plain_console(events(FIXTURES / "our_run.jsonl"))
    assert "] task " not in text and "admitted" not in text
    assert "run ended: finished" in text
