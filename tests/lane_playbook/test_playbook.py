"""Playbooks end to end through `crucible run`: one pass, ceilings, early completion, asks, resume."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

from crucible_core.session_log import read_events
from tests.cli_support import CRUCIBLE, EXAMPLES, crucible_env, run_crucible


def example(tmp_path: Path) -> Path:
    target = tmp_path / "playbook"
    shutil.copytree(EXAMPLES / "playbook", target, ignore=shutil.ignore_patterns("workspace", "state"))
    return target


def events(pack: Path) -> list[dict[str, Any]]:
    return list(read_events(pack / "state" / "session.jsonl"))


def rows(pack: Path) -> dict[str, dict[str, Any]]:
    return {e["task"]: e for e in events(pack) if e["kind"] == "task_result"}


def shutdown(pack: Path) -> dict[str, Any]:
    return [e for e in events(pack) if e["kind"] == "shutdown"][-1]


def play(pack: Path, *args: str, env: dict[str, str] | None = None):
    return run_crucible(
        "run", "--manifest", pack / "crucible.toml", "--max-cost", "1", *args, cwd=pack, env=env
    )


def test_example_playbook_runs_once_and_passes(tmp_path: Path) -> None:
    pack = example(tmp_path)
    done = play(pack, "--max-time", "5m")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "playbook valid" in done.stdout
    settled = rows(pack)
    assert list(settled) == ["seed", "scan", "gate", "report", "summarize", "notify"]
    assert all(row["status"] == "pass" and row.get("metric") is None for row in settled.values())
    assert settled["summarize"]["output"] == {"summary": "2 notes need attention"}  # the real backend path
    assert "src/b.txt:1:# TODO: test this" in (pack / "workspace" / "out" / "report.md").read_text()
    outcome = json.loads((pack / "workspace" / "notify.json").read_text())["outcome"]
    assert outcome["exit"] == "finished" and set(outcome["tasks"]) == {
        "seed",
        "scan",
        "gate",
        "report",
        "summarize",
    }
    assert shutdown(pack)["outcome"] == "finished"
    (start,) = [e for e in events(pack) if e["kind"] == "start"]
    assert start["gate"] == "task" and start["iters_total"] == 1 and start["max_secs"] == 300
    assert (pack / "state" / "workflow.toml").read_text().startswith("# generated from workflow.star")


def test_a_playbook_writes_its_identity_and_one_summary_for_the_readers(tmp_path: Path) -> None:
    from crucible_core.manifest.loader import load_manifest
    from crucible_core.run.identity import run_identity

    pack = example(tmp_path)
    assert play(pack, "--max-time", "5m").returncode == 0
    kinds = [e["kind"] for e in events(pack)]
    assert kinds.count("identity") == 1 and kinds.count("summary") == 1
    assert kinds.index("start") < kinds.index("identity") < kinds.index("plan_admitted")
    # summary, finished, then shutdown as the last line, as every lane ends (C-WIRE: after finished/summary)
    assert kinds[-3:] == ["summary", "finished", "shutdown"]
    (identity,) = [e for e in events(pack) if e["kind"] == "identity"]
    artifact = (pack / "state" / "workflow.toml").read_text()
    expected = run_identity(load_manifest(pack / "crucible.toml"), identity["base_commit"], artifact)
    assert identity["identity"]["digest"] == expected.digest
    # the manifest hash takes in the compiled workflow: a different param is a different identity
    other = run_identity(load_manifest(pack / "crucible.toml"), identity["base_commit"], artifact + "#")
    assert other.manifest_hash != expected.manifest_hash
    (summary,) = [e for e in events(pack) if e["kind"] == "summary"]
    assert summary["gate"] == "task" and summary["iterations"] == 1 and summary["best_score"] is None
    for reader in ("results", "status", "show"):
        done = run_crucible(reader, "--manifest", pack / "crucible.toml", cwd=pack)
        assert done.returncode == 0, (reader, done.stdout, done.stderr)
        assert "finished" in done.stdout


def test_both_ceilings_are_required_before_anything_runs(tmp_path: Path) -> None:
    pack = example(tmp_path)
    done = play(pack)  # --max-cost only
    assert done.returncode == 64 and "--max-time" in done.stderr
    assert not (pack / "state").exists() and not (pack / "workspace").exists()
    more = run_crucible("run", "--manifest", pack / "crucible.toml", "--max-time", "1m", "--iterations", "3")
    assert more.returncode == 64


def test_early_completion_ends_dispatch_and_still_runs_the_epilogue(tmp_path: Path) -> None:
    pack = example(tmp_path)
    done = play(pack, "--max-time", "5m", "--param", "marker=NOPE")
    assert done.returncode == 0, done.stdout + done.stderr
    settled = rows(pack)
    assert "report" not in settled  # left undispatched, not blocked
    assert settled["gate"]["output"]["complete"] is True
    final = shutdown(pack)
    assert final["outcome"] == "complete" and "no notes to report" in final["reason"]
    outcome = json.loads((pack / "workspace" / "notify.json").read_text())["outcome"]
    assert outcome["exit"] == "complete" and outcome["verdict"] == "pass"


def test_a_bad_param_is_refused_before_compiling(tmp_path: Path) -> None:
    pack = example(tmp_path)
    done = play(pack, "--max-time", "5m", "--param", "marker=lower")
    assert done.returncode == 64 and "does not match pattern" in done.stderr
    assert not (pack / "state").exists()


def write_pack(tmp_path: Path, source: str) -> Path:
    pack = tmp_path / "pack"
    pack.mkdir(parents=True)
    (pack / "crucible.toml").write_text('[workflow]\ntype = "playbook"\n\n[agent]\ngoal = "test"\n')
    (pack / "workflow.star").write_text(textwrap.dedent(source))
    return pack


def test_wall_clock_ceiling_kills_the_attempt_in_flight(tmp_path: Path) -> None:
    pack = write_pack(
        tmp_path,
        """\
        slow = command(name = "slow", run = "sleep 60")
        after = command(name = "after", run = "true", depends_on = [slow])
        tell = command(name = "tell", run = "touch told", stage = "epilogue")
        workflow(type = "playbook", tasks = [slow, after, tell])
        """,
    )
    done = play(pack, "--max-time", "2s")
    assert done.returncode == 4, done.stdout + done.stderr
    settled = rows(pack)
    assert settled["slow"]["status"] == "blocked"
    assert settled["slow"]["blocked"]["reason"] == "wall_clock_ceiling"
    assert settled["after"]["blocked"]["reason"] == "wall_clock_ceiling"
    assert settled["tell"]["status"] == "blocked"  # a ceiling stops the epilogue too
    final = shutdown(pack)
    assert final["outcome"] == "budget" and final["reason"].startswith("wall_clock")
    assert not (pack / "workspace" / "told").exists()


def test_required_failure_is_invalid_but_the_epilogue_reports_it(tmp_path: Path) -> None:
    pack = write_pack(
        tmp_path,
        """\
        broken = command(name = "broken", run = "exit 3")
        never = command(name = "never", run = "true", depends_on = [broken])
        tell = command(name = "tell", run = 'echo "$CRUCIBLE_INPUTS" > told.json', stage = "epilogue")
        workflow(type = "playbook", tasks = [broken, never, tell])
        """,
    )
    done = play(pack, "--max-time", "1m")
    assert done.returncode == 4
    assert rows(pack)["never"]["status"] == "blocked"
    told = json.loads((pack / "workspace" / "told.json").read_text())["outcome"]
    assert told["verdict"] == "fail" and told["tasks"]["broken"]["status"] == "fail"


def test_asks_are_recorded_and_bounded(tmp_path: Path) -> None:
    asks = json.dumps(
        {"asks": [{"key": f"item-{i}", "workflow": "fix", "params": {"n": i}} for i in range(3)]}
    )
    pack = write_pack(
        tmp_path,
        f"""\
        emit = command(name = "emit", run = '''echo '{asks}' ''')
        workflow(type = "playbook", tasks = [emit])
        """,
    )
    done = play(pack, "--max-time", "1m")
    assert done.returncode == 0, done.stdout + done.stderr
    (recorded,) = [e for e in events(pack) if e["kind"] == "asks_emitted"]
    assert recorded["task"] == "emit"
    assert [a["key"] for a in recorded["asks"]] == ["item-0", "item-1", "item-2"]
    assert recorded["asks"][0] == {"key": "item-0", "workflow": "fix", "params": {"n": 0}}
    shutil.rmtree(pack / "state")
    shutil.rmtree(pack / "workspace")
    bounded = play(pack, "--max-time", "1m", "--max-asks", "2")
    assert bounded.returncode == 4
    assert "--max-asks" in rows(pack)["emit"]["note"]
    assert not [e for e in events(pack) if e["kind"] == "asks_emitted"]


def test_an_ask_whose_key_the_wire_refuses_fails_its_task_and_is_never_written(tmp_path: Path) -> None:
    asks = json.dumps({"asks": [{"key": "two words", "workflow": "fix"}]})
    pack = write_pack(
        tmp_path,
        f"""\
        emit = command(name = "emit", run = '''echo '{asks}' ''')
        workflow(type = "playbook", tasks = [emit])
        """,
    )
    done = play(pack, "--max-time", "1m")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert rows(pack)["emit"]["status"] == "fail" and "contains whitespace" in rows(pack)["emit"]["note"]
    assert not [e for e in events(pack) if e["kind"] == "asks_emitted"]


def test_frozen_injects_are_restored_before_every_task(tmp_path: Path) -> None:
    pack = write_pack(
        tmp_path,
        """\
        tamper = command(name = "tamper", run = "echo 'exit 1' > gate.sh")
        gate = command(name = "gate", run = "sh gate.sh", depends_on = [tamper])
        workflow(type = "playbook", tasks = [tamper, gate])
        """,
    )
    (pack / "gate.sh").write_text("exit 0\n")
    text = (
        (pack / "crucible.toml")
        .read_text()
        .replace("[agent]", '[workspace]\ninject = ["gate.sh"]\n\n[agent]')
    )
    (pack / "crucible.toml").write_text(text)
    done = play(pack, "--max-time", "1m")
    assert done.returncode == 0, done.stdout + done.stderr


def test_playbook_killed_mid_graph_resumes_without_rerunning_settled_tasks(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    pack = write_pack(
        tmp_path,
        """\
        first = command(
            name = "first",
            run = "echo x >> $MARKS/first; mkdir -p out; echo A > out/a.txt; echo junk > junk.txt",
            emits_files = ["out/a.txt"],
        )
        second = command(
            name = "second",
            run = "echo x >> $MARKS/second; if [ ! -f $MARKS/armed ]; then touch $MARKS/armed; sleep 60; fi; test -f out/a.txt && test ! -f junk.txt",
            depends_on = [first],
        )
        workflow(type = "playbook", tasks = [first, second])
        """,
    )
    env = crucible_env(MARKS=str(marks))
    argv = [
        str(CRUCIBLE),
        "run",
        "--manifest",
        str(pack / "crucible.toml"),
        "--max-cost",
        "1",
        "--max-time",
        "5m",
    ]
    proc = subprocess.Popen(
        argv, cwd=pack, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(300):
            if (marks / "armed").exists():
                break
            time.sleep(0.05)
        assert (marks / "armed").exists()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert list(rows(pack)) == ["first"]
    resumed = run_crucible(*argv[1:], "--resume", cwd=pack, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (marks / "first").read_text().count("x") == 1  # settled: never dispatched again
    assert (marks / "second").read_text().count("x") == 2  # in flight when killed: runs again
    assert any(e["kind"] == "recovery" for e in events(pack))
    kinds = [e["kind"] for e in events(pack)]
    assert kinds.count("summary") == 1 and kinds.count("identity") == 2  # the resume's is marked resumed
    assert [e for e in events(pack) if e["kind"] == "identity"][1]["resumed"] is True
    again = run_crucible(*argv[1:], "--resume", cwd=pack, env=env)  # already finished: nothing more
    assert again.returncode == 0 and [e["kind"] for e in events(pack)].count("summary") == 1
    # the workspace was rebuilt from the pristine start plus passing tasks' declared files
    assert (pack / "workspace" / "out" / "a.txt").read_text() == "A\n"
    assert not (pack / "workspace" / "junk.txt").exists()


def test_only_passing_tasks_reach_the_git_memory(tmp_path: Path) -> None:
    pack = write_pack(
        tmp_path,
        """\
        good = command(name = "good", run = "echo kept > kept.txt")
        bad = command(name = "bad", run = "echo lost > lost.txt; exit 1", depends_on = [good], required = False)
        workflow(type = "playbook", tasks = [good, bad])
        """,
    )
    done = play(pack, "--max-time", "1m")
    assert done.returncode == 0, done.stdout + done.stderr
    workspace = pack / "workspace"
    log = subprocess.run(["git", "log", "--format=%s"], cwd=workspace, capture_output=True, text=True)
    assert log.stdout.split("\n")[:2] == ["crucible: task good", "crucible: playbook base"]
    assert (workspace / "kept.txt").exists() and not (workspace / "lost.txt").exists()


def test_without_the_git_world_plugin_a_playbook_is_refused_naming_it(tmp_path: Path) -> None:
    pack = example(tmp_path)
    env = crucible_env(
        CRUCIBLE_LOAD_PLUGINS="core,backend_local,judge_command,workflow_starlark,lane_playbook,task_agent"
    )
    done = play(pack, "--max-time", "5m", env=env)
    assert done.returncode == 12, done.stdout + done.stderr
    assert "pip install crucible-plugin-world-git" in done.stderr
    assert not (pack / "state").exists() and not (pack / "workspace").exists()
    checked = run_crucible("check", "--manifest", pack / "crucible.toml", cwd=pack, env=env)
    assert checked.returncode == 13, checked.stdout + checked.stderr
    assert "pip install crucible-plugin-world-git" in checked.stdout


def test_without_the_playbook_lane_plugin_a_playbook_is_refused_naming_it(tmp_path: Path) -> None:
    pack = example(tmp_path)
    names = "core,world_git,backend_local,judge_command,workflow_starlark,task_agent"  # all but the lane
    env = crucible_env(CRUCIBLE_LOAD_PLUGINS=names)
    done = play(pack, "--max-time", "5m", env=env)
    assert done.returncode == 12, done.stdout + done.stderr
    assert "pip install crucible-plugin-lane-playbook" in done.stderr
    assert not (pack / "state").exists() and not (pack / "workspace").exists()
    checked = run_crucible("check", "--manifest", pack / "crucible.toml", cwd=pack, env=env)
    assert checked.returncode == 13, checked.stdout + checked.stderr
    assert "pip install crucible-plugin-lane-playbook" in checked.stdout


def test_shared_tasks_run_one_at_a_time_so_a_failure_never_reaches_a_commit(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    pack = write_pack(
        tmp_path,
        """\
        good = command(name = "good", run = "echo good-start >> $MARKS/order; sleep 0.3; echo kept > kept.txt; echo good-end >> $MARKS/order")
        bad = command(name = "bad", run = "echo bad-start >> $MARKS/order; echo lost > lost.txt; sleep 0.3; echo bad-end >> $MARKS/order; exit 1", required = False)
        side = command(name = "side", run = "echo side >> $MARKS/side; echo scratch > scratch.txt", isolated = True)
        workflow(type = "playbook", tasks = [good, bad, side])
        """,
    )
    done = play(pack, "--max-time", "1m", env=crucible_env(MARKS=str(marks)))
    assert done.returncode == 0, done.stdout + done.stderr
    # no overlap in the shared workspace: the failing task's file could not ride along in a commit
    assert (marks / "order").read_text().split() == ["good-start", "good-end", "bad-start", "bad-end"]
    assert (marks / "side").exists()
    workspace = pack / "workspace"
    log = subprocess.run(["git", "log", "--format=%s"], cwd=workspace, capture_output=True, text=True)
    assert log.stdout.split("\n")[:2] == ["crucible: task good", "crucible: playbook base"]
    assert (workspace / "kept.txt").exists() and not (workspace / "lost.txt").exists()
    assert not (workspace / "scratch.txt").exists()  # an isolated task's edits are discarded


def test_per_task_deadlines_fail_the_task_and_are_bounded_by_the_operator(tmp_path: Path) -> None:
    pack = write_pack(
        tmp_path,
        """\
        hang = command(name = "hang", run = "sleep 30", required = False)
        workflow(type = "playbook", tasks = [hang])
        """,
    )
    done = play(pack, "--max-time", "1m", "--task-timeout", "1s")
    assert done.returncode == 0, done.stdout + done.stderr  # advisory: its failure is not the verdict
    assert rows(pack)["hang"]["status"] == "fail" and "deadline" in rows(pack)["hang"]["note"]
    longer = write_pack(
        tmp_path / "second",
        """\
        slow = command(name = "slow", run = "true", timeout = 7200)
        workflow(type = "playbook", tasks = [slow])
        """,
    )
    refused = play(longer, "--max-time", "1m", "--max-task-timeout", "1h")
    assert refused.returncode == 64 and "--max-task-timeout" in refused.stderr
    assert not (longer / "state").exists()


def test_time_spent_before_a_crash_counts_but_time_dead_does_not() -> None:
    from crucible_lane_playbook.lane import _elapsed_before

    log = [
        {"kind": "plan_admitted", "ts": 100.0},
        {"kind": "task_result", "ts": 130.0},  # first process: 30 s, then killed
        {"kind": "start", "ts": 998.0},
        {"kind": "recovery", "ts": 1000.0},
        {"kind": "task_result", "ts": 1012.0},  # second process: 12 s, then killed
    ]
    assert _elapsed_before(log) == 42.0
