"""`crucible plan show/run` through the real CLI: formats, refusals and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_support import run_crucible

PLAN = """\
version = 1
[budget]
usd = 2.0

[[task]]
name = "a"
kind = "command"
command = "echo '{\\"score\\": 1}'"
emits = ["score"]

[[task]]
name = "pick"
kind = "top_k"
k = 1
direction = "lower"
depends_on = ["a"]
"""


def test_show_prints_the_admitted_graph_in_every_format(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    shown = run_crucible("plan", "show", plan)
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert [t["name"] for t in document["tasks"]] == ["a", "pick"]
    assert document["tasks"][1]["depends_on"] == ["a"] and document["verdict"] == "runnable"
    toml = run_crucible("plan", "show", plan, "--format", "toml").stdout
    again = tmp_path / "again.toml"
    again.write_text(toml)
    assert json.loads(run_crucible("plan", "show", again).stdout)["tasks"] == document["tasks"]
    assert '"a" -> "pick"' in run_crucible("plan", "show", plan, "--format", "dot").stdout
    assert "t0 --> t1" in run_crucible("plan", "show", plan, "--format", "mmd").stdout


def test_show_predicts_truncation_as_a_run_would_through_dependencies(tmp_path: Path) -> None:
    # An advisory task that cannot run here is skipped, and a required task waiting for it to
    # pass (join = "passed") can never start: the run truncates, so show must say so too.
    plan = tmp_path / "plan.toml"
    advisory = PLAN.replace('emits = ["score"]', 'emits = ["score"]\nneeds = "tpu"\nrequired = false')
    advisory = advisory.replace('depends_on = ["a"]', 'depends_on = ["a"]\njoin = "passed"')
    plan.write_text(advisory)
    shown = json.loads(run_crucible("plan", "show", plan).stdout)
    assert shown["verdict"] == "truncated: pick (depends on work that cannot run here) cannot run here"
    assert json.loads(run_crucible("plan", "show", plan, "--cap", "tpu").stdout)["verdict"] == "runnable"
    ran = run_crucible("plan", "run", plan, "--workspace", tmp_path)
    assert ran.returncode != 0 and "truncated" in ran.stdout + ran.stderr


def test_show_manifest_prints_the_default_iteration_graph(example) -> None:
    manifest = example("counter")
    shown = run_crucible("plan", "show", "--manifest", manifest, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    tasks = json.loads(shown.stdout)["tasks"]
    assert [(t["name"], t["kind"], t["depends_on"]) for t in tasks] == [
        ("propose", "engine_propose", []),
        ("apply", "engine_apply", ["propose"]),
        ("measure", "engine_measure", ["apply"]),
        ("decide", "engine_decide", ["measure"]),
    ]


def test_a_refused_plan_exits_10_and_names_every_problem(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN + '\n[[task]]\nname = "p"\nkind = "engine"\nop = "measure"\ndepends_on = ["nope"]\n')
    done = run_crucible("plan", "run", plan, cwd=tmp_path)
    assert done.returncode == 10
    assert "World and a frozen Judge" in done.stderr and "unknown task 'nope'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "state").exists()  # refused before anything was written


def test_run_exits_4_when_a_required_task_fails(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'version = 1\n[budget]\nusd = 1\n[[task]]\nname = "x"\nkind = "command"\ncommand = "exit 3"\n'
    )
    done = run_crucible("plan", "run", plan, cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    assert "x  fail" in done.stdout and "plan fail" in done.stdout
