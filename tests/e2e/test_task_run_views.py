"""A playbook and a plan file as every view shows them: their tasks, verdict and outcome, never an empty loop.

Real runs (examples/playbook through `crucible run`, plan files through `crucible plan run`),
real logs, the CLI driven in this process. The loop's own views are tested in test_run_views.py
and tests/flow; here one task-lane loop (gate "task", like a playbook's) checks it stays a loop.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from crucible_core.control.bridge import ControlBridge
from crucible_core.control.inbox import Inbox
from crucible_core.control.ledger import Ledger
from tests.cli_support import EXAMPLES, crucible_in_process

PLAYBOOK_TASKS = ["seed", "scan", "gate", "report", "summarize", "notify"]

# build's output carries markup and a right-to-left override; test's stderr (its note) sets the
# terminal's title and colour: the views must show them as inert text.
PLAN = """
version = 1
[budget]
usd = 1.0

[[task]]
name = "build"
kind = "command"
command = "echo '{\\"artifact\\": \\"<script>window.__pwned=1</script>\\", \\"flip\\": \\"\\u202eesrever\\"}'"

[[task]]
name = "lint"
kind = "command"
required = false
command = "echo '{\\"warnings\\": 2}'"

[[task]]
name = "test"
kind = "command"
command = "printf '\\\\033]0;pwned\\\\007\\\\033[31mred alert\\\\n' >&2; exit 3"
depends_on = ["build"]

[[task]]
name = "report"
kind = "command"
command = "echo '{\\"ok\\": true}'"
depends_on = ["test"]

[[task]]
name = "tell"
kind = "command"
stage = "epilogue"
command = "echo '{\\"told\\": true}'"
"""
PLAN_TASKS = ["build", "lint", "test", "report", "tell"]


def run_plan(folder: Path, text: str) -> Path:
    """Run a plan file in `folder` and return its state dir."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plan.toml").write_text(text)
    (folder / "ws").mkdir(exist_ok=True)
    crucible_in_process("plan", "run", folder / "plan.toml", "--workspace", folder / "ws")
    return folder / "state"


@pytest.fixture
def playbook(finished_playbook: Path) -> Path:
    """examples/playbook run once to its end (tests/conftest.py); its manifest."""
    return finished_playbook


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PLAN run to its end (test fails, so report is blocked and the verdict fails); its state dir."""
    return run_plan(tmp_path_factory.mktemp("views") / "plan", PLAN)


def out(*args: str | Path) -> str:
    done = crucible_in_process(*args)
    assert done.exit_code == 0, done.output
    return done.output


def task_rows(text: str) -> dict[str, str]:
    """The task lines of a task run's text view (between the column header and the tally), by name."""
    lines = text.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("task "))
    return {line.split()[0]: line for line in lines[start + 1 : -1]}


# -- a playbook -----------------------------------------------------------------------------------


def test_show_presents_a_playbook_as_its_tasks(playbook: Path) -> None:
    text = out("show", "--manifest", playbook)
    lines = text.splitlines()
    assert lines[0] == "playbook valid; outcome finished (passed: every required task passed)"
    rows = task_rows(text)
    assert list(rows) == PLAYBOOK_TASKS  # graph order
    assert all(row.split()[1] == "pass" and " 1x " in row for row in rows.values())
    assert rows["seed"].endswith('out {"seeded":2}')
    assert rows["summarize"].endswith('out {"summary":"2 notes need attention"}')
    assert "[epilogue] [advisory]" in rows["notify"]
    assert lines[-1] == "6 tasks: 6 pass; spent $0.0000; resumed 0 time(s)"
    assert "best" not in text and "kept" not in text and "iteration" not in text


def test_results_and_its_json_present_a_playbook(playbook: Path) -> None:
    assert out("results", "--manifest", playbook) == out("show", "--manifest", playbook)
    doc = json.loads(out("results", "--json", "--manifest", playbook))
    assert (doc["kind"], doc["verdict"], doc["outcome"]) == ("playbook", "pass", "finished")
    assert doc["reason"] == "passed: every required task passed" and doc["identity"].startswith("v2:")
    tasks = {t["name"]: t for t in doc["tasks"]}
    assert list(tasks) == PLAYBOOK_TASKS
    summarize = tasks["summarize"]
    assert (summarize["kind"], summarize["status"], summarize["attempts"]) == ("agent", "pass", 1)
    assert summarize["secs"] > 0 and summarize["depends_on"] == ["report"]
    assert json.loads(summarize["output"]) == {"summary": "2 notes need attention"}
    assert (tasks["notify"]["stage"], tasks["notify"]["required"]) == ("epilogue", False)
    assert "rows" not in doc and "kept" not in doc
    assert json.loads(out("show", "--json", "--manifest", playbook)) == doc


def test_status_of_a_finished_playbook_reads_its_log(playbook: Path) -> None:
    text = out("status", "--manifest", playbook)
    first, rest = text.split("\n", 1)
    assert first.startswith("no live run answers") and first.endswith("session.jsonl:")
    assert rest == out("show", "--manifest", playbook)
    assert json.loads(out("status", "--json", "--manifest", playbook))["verdict"] == "pass"


def test_the_flow_of_a_playbook_is_its_task_graph(playbook: Path, tmp_path: Path) -> None:
    session = playbook.parent / "state" / "session.jsonl"
    said = out("flow", "--session", session, "--out", tmp_path / "flow.json")
    assert said.endswith("(playbook: 6 tasks: 6 pass, verdict valid, outcome finished)\n")
    model = json.loads((tmp_path / "flow.json").read_text())
    assert (model["header"]["kind"], model["header"]["verdict"]) == ("playbook", "pass")
    assert [(t["name"], t["status"]) for t in model["plan"]] == [(name, "pass") for name in PLAYBOOK_TASKS]
    out("flow", "--session", session, "--out", tmp_path / "flow.html")
    page = (tmp_path / "flow.html").read_text()
    assert 'class="task-graph"' in page and "score-chart" not in page and "no iterations" not in page
    assert page.count('class="node st-pass"') == 6 and page.count('class="edge"') == 4
    assert 'verdict: <b><span class="verdict-pass">valid</span>' in page


# -- a plan file ----------------------------------------------------------------------------------


def test_show_presents_a_failed_plan_with_each_tasks_fate(plan: Path) -> None:
    text = out("show", "--state-dir", plan)
    assert text.splitlines()[0] == (
        "plan fail; outcome error (failed: required task(s) did not pass: test, report)"
    )
    rows = task_rows(text)
    assert list(rows) == PLAN_TASKS
    assert [row.split()[1] for row in rows.values()] == ["pass", "pass", "fail", "blocked", "pass"]
    assert rows["test"].endswith("exited 3: red alert")  # its stderr, the escapes taken out
    assert rows["report"].split()[1:5] == ["blocked", "-", "-", "$0.0000"]  # never ran: no time, no try
    assert rows["report"].endswith("required task 'test' did not pass, so the plan halted")
    assert "[advisory]" in rows["lint"] and "[epilogue]" in rows["tell"]
    assert '"artifact":"<script>window.__pwned=1</script>"' in rows["build"]
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert text.splitlines()[-1] == "5 tasks: 3 pass, 1 fail, 1 blocked; spent $0.0000; resumed 0 time(s)"


def test_results_json_of_a_plan_carries_the_log_as_written(plan: Path) -> None:
    assert out("results", "--state-dir", plan) == out("show", "--state-dir", plan)
    doc = json.loads(out("results", "--json", "--state-dir", plan))
    assert (doc["kind"], doc["verdict"], doc["outcome"], doc["objective"]) == (
        "plan",
        "fail",
        "error",
        None,
    )
    tasks = {t["name"]: t for t in doc["tasks"]}
    assert tasks["test"]["note"] == "exited 3: \x1b]0;pwned\x07\x1b[31mred alert"  # JSON escapes it
    assert (tasks["report"]["status"], tasks["report"]["attempts"]) == ("blocked", 0)
    assert json.loads(tasks["build"]["output"])["flip"] == "\u202eesrever"


def test_status_of_a_finished_plan_reads_its_log(plan: Path) -> None:
    text = out("status", "--state-dir", plan)
    assert text.split("\n", 1)[1] == out("show", "--state-dir", plan)
    assert "\nplan fail; outcome error (failed: " in text
    assert json.loads(out("status", "--json", "--state-dir", plan))["tasks"][2]["status"] == "fail"


def test_the_flow_of_a_plan_escapes_what_its_tasks_wrote(plan: Path, tmp_path: Path) -> None:
    session = plan / "session.jsonl"
    for ext in ("html", "dot", "mmd"):
        out("flow", "--session", session, "--out", tmp_path / f"plan.{ext}")
    page = (tmp_path / "plan.html").read_text()
    assert "<script>window" not in page and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    assert page.count('class="node st-fail"') == 1 and page.count('class="node st-blocked"') == 1
    dot = (tmp_path / "plan.dot").read_text()
    assert 'label="plan fail; outcome error";' in dot and "baseline" not in dot
    assert "task2 -> task3;" in dot  # test -> report
    assert "task2 --> task3" in (tmp_path / "plan.mmd").read_text()


@pytest.mark.leaves_open_log("it cuts a finished plan's log to its first lines, as a live run's")
def test_a_plan_under_way_shows_its_settled_tasks_and_the_bridge_status(plan: Path, tmp_path: Path) -> None:
    """A live plan: its log so far (admitted, one task settled) and a real bridge answering status."""
    state = tmp_path / "state"
    state.mkdir()
    lines_so_far = (plan / "session.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:2]
    (state / "session.jsonl").write_text("".join(lines_so_far), encoding="utf-8")
    bridge = ControlBridge(Ledger(state / "admissions.jsonl"), Inbox())
    bridge.inbox.publish(phase="running", spent=0.25)
    bridge.start(state / "control.json")
    try:
        text = out("status", "--state-dir", state)
        doc = json.loads(out("status", "--json", "--state-dir", state))
    finally:
        bridge.close()
    lines = text.splitlines()
    assert lines[:2] == ["plan running: 1 of 5 tasks settled", "spent $0.2500"]
    rows = task_rows(text)
    settled = json.loads(lines_so_far[1])["task"]  # build or lint: they run side by side
    assert rows[settled].split()[1] == "pass"
    assert all(rows[name].split()[1:4] == ["pending", "-", "-"] for name in PLAN_TASKS if name != settled)
    assert doc["phase"] == "running" and doc["log"]["verdict"] is None
    assert out("show", "--state-dir", state).startswith(
        "plan: verdict none yet; outcome none yet (the run is live, or died without a shutdown line)"
    )


@pytest.mark.leaves_open_log("it appends a later process's recovery line after a shutdown")
def test_every_outcome_is_shown_as_the_log_holds_it(tmp_path: Path) -> None:
    complete = run_plan(
        tmp_path / "complete",
        """
version = 1
[budget]
usd = 1.0
[[task]]
name = "check"
kind = "command"
command = "echo '{\\"complete\\": true, \\"reason\\": \\"nothing to do\\"}'"
[[task]]
name = "work"
kind = "command"
command = "echo '{}'"
depends_on = ["check"]
""",
    )
    text = out("show", "--state-dir", complete)
    assert text.startswith("plan pass; outcome complete (complete: task 'check' declared early completion")
    assert task_rows(text)["work"].split()[1:4] == ["undispatched", "-", "-"]

    budget = run_plan(
        tmp_path / "budget",
        """
version = 1
[budget]
usd = 0.01
[[task]]
name = "spend"
kind = "command"
command = "echo '{\\"cost_usd\\": 0.5}'"
""",
    )
    doc = json.loads(out("results", "--json", "--state-dir", budget))
    assert (doc["verdict"], doc["outcome"], doc["spent_usd"]) == ("fail", "budget", 0.5)  # every task passed

    # a run service's exit recorded after the shutdown does not hide the outcome; a later process does
    log = budget / "session.jsonl"
    with log.open("a", encoding="utf-8") as handle:
        handle.write('{"v":1,"kind":"service_exit","service":"db","status":0,"how":"stopped"}\n')
    assert out("show", "--state-dir", budget).startswith("plan fail; outcome budget (cost: spent $0.5000")
    with log.open("a", encoding="utf-8") as handle:
        handle.write('{"v":1,"kind":"recovery","class":"died_in_plan_task","iter":0,"detail":"x"}\n')
    assert out("show", "--state-dir", budget).startswith("plan: verdict none yet; outcome none yet")


def test_a_task_lane_loop_carries_the_task_gate_and_stays_a_loop(tmp_path: Path) -> None:
    folder = tmp_path / "task"
    shutil.copytree(EXAMPLES / "task", folder, ignore=shutil.ignore_patterns("workspace", "state"))
    manifest = folder / "crucible.toml"
    assert crucible_in_process("run", "--manifest", manifest, "--iterations", "2").exit_code == 0
    text = out("show", "--manifest", manifest)
    assert "best - (baseline -); 2 kept over 2 iterations" in text and "verdict" not in text
    assert json.loads(out("results", "--json", "--manifest", manifest))["kind"] == "loop"
