"""The executor on real subprocesses: statuses, blocking reasons, retries, budget, outputs and files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.plan.plan_support import results, run_plan

HEAD = "version = 1\n[budget]\nusd = {usd}\n"


def task(name: str, command: str, *extra: str, kind: str = "command") -> str:
    lines = [f'name = "{name}"', f'kind = "{kind}"', f"command = {json.dumps(command)}", *extra]
    return "[[task]]\n" + "\n".join(lines) + "\n"


def plan(*tasks: str, usd: float = 5.0) -> str:
    return HEAD.format(usd=usd) + "".join(tasks)


def test_fan_out_top_k_isolation_advisory_and_epilogue(tmp_path: Path) -> None:
    text = plan(
        task("prep", "echo base > shared.txt; echo '{\"ok\": true}'"),
        task("fast", "echo '{\"score\": 2.5}'", 'depends_on = ["prep"]', 'emits = ["score"]'),
        task(
            "slow",
            "echo '{\"score\": 9}'",
            'depends_on = ["prep"]',
            'emits = ["score"]',
            'isolation = "worktree"',
        ),
        # an isolated task's edits never reach the shared workspace
        task(
            "scribble",
            "echo junk > shared.txt; echo '{\"score\": 1}'",
            'depends_on = ["prep"]',
            'isolation = "worktree"',
            'emits = ["score"]',
        ),
        task("lint", "exit 7", 'depends_on = ["prep"]', "required = false"),
        task("after-lint", "echo '{}'", 'depends_on = ["lint"]', "required = false"),
        '[[task]]\nname = "pick"\nkind = "top_k"\nk = 2\ndirection = "lower"\ndepends_on = ["fast", "slow", "scribble"]\n',
        task("report", 'echo "$CRUCIBLE_INPUTS" > ../outcome.json; echo "{}"', 'stage = "epilogue"'),
    )
    report, events = run_plan(tmp_path, text, jobs=3)
    by_task = results(events)
    assert report.verdict == "pass"
    assert {name: r["status"] for name, r in by_task.items()} == {
        "prep": "pass",
        "fast": "pass",
        "slow": "pass",
        "scribble": "pass",
        "lint": "fail",
        "after-lint": "blocked",
        "pick": "pass",
        "report": "pass",
    }
    assert by_task["after-lint"]["blocked"] == {"reason": "dependency_did_not_pass", "task": "lint"}
    assert [c["task"] for c in by_task["pick"]["output"]["top"]] == ["scribble", "fast"]
    assert (tmp_path / "ws" / "shared.txt").read_text() == "base\n"
    outcome = json.loads((tmp_path / "outcome.json").read_text())["outcome"]
    assert outcome["exit"] == "finished" and outcome["tasks"]["lint"]["status"] == "fail"
    kinds = [e["kind"] for e in events]
    assert kinds.count("plan_admitted") == 1 and kinds.index("plan_admitted") < kinds.index("task_result")
    admitted = next(e for e in events if e["kind"] == "plan_admitted")
    assert admitted["tasks"][-1] == {
        "name": "report",
        "kind": "command",
        "depends_on": [],
        "session": "",
        "needs": "any",
        "required": True,
        "join": "all",
        "stage": "epilogue",
        "over": "",  # the contract writes the mapping fields on every task
        "max_fanout": 0,
    }


def test_inputs_carry_direct_dependency_outputs_and_the_task_name(tmp_path: Path) -> None:
    text = plan(
        task("a", "echo '{\"n\": 1}'"),
        task("b", "echo '{\"n\": 2}'", 'depends_on = ["a"]'),
        task("c", 'echo "$CRUCIBLE_TASK $CRUCIBLE_INPUTS" > ../c.txt; echo "{}"', 'depends_on = ["b"]'),
    )
    run_plan(tmp_path, text)
    name, inputs = (tmp_path / "c.txt").read_text().split(" ", 1)
    assert name == "c" and json.loads(inputs) == {"b": {"n": 2}}


def test_a_required_failure_halts_blocks_the_rest_and_the_epilogue_still_runs(tmp_path: Path) -> None:
    text = plan(
        task("gate", "echo nope >&2; exit 1"),
        task("next", "touch ../next-ran", 'depends_on = ["gate"]'),
        task("other", "touch ../other-ran", 'depends_on = ["next"]'),
        task("epi", "touch ../epi-ran; echo '{}'", 'stage = "epilogue"'),
    )
    report, events = run_plan(tmp_path, text, jobs=1)
    by_task = results(events)
    assert report.verdict == "fail" and report.state.value == "failed"
    assert by_task["gate"]["status"] == "fail" and "nope" in by_task["gate"]["note"]
    assert by_task["next"]["blocked"] == {"reason": "required_task_failed", "task": "gate"}
    assert by_task["other"]["blocked"] == {"reason": "required_task_failed", "task": "gate"}
    assert by_task["epi"]["status"] == "pass" and (tmp_path / "epi-ran").exists()
    assert not (tmp_path / "next-ran").exists() and not (tmp_path / "other-ran").exists()
    assert events[-1]["kind"] == "shutdown"


def test_transport_failures_retry_measured_failures_do_not(tmp_path: Path) -> None:
    count = tmp_path / "count"
    text = plan(
        # a measured failure: runs once
        task("measured", f"echo x >> {count}-m; exit 2", "required = false"),
        # the agent task spawns a command that does not exist: transport, retried twice
        '[[task]]\nname = "turn"\nkind = "agent"\nprompt = "p"\nrequired = false\nretries = 2\n',
    )
    _, events = run_plan(tmp_path, text, agent_cmd=f"echo x >> {count}-t; exec /nonexistent/agent")
    by_task = results(events)
    assert by_task["measured"]["attempts"] == 1 and len((tmp_path / "count-m").read_text().split()) == 1
    # `exec` of a missing binary exits 127: the stand-in ran, so this is measured, not transport
    assert by_task["turn"]["status"] == "fail"


def test_a_spawn_failure_is_transport_and_retried(tmp_path: Path) -> None:
    text = plan('[[task]]\nname = "turn"\nkind = "agent"\nprompt = "p"\nretries = 2\n')
    report, events = run_plan(tmp_path, text)  # no --agent-cmd: nothing can carry the turn
    turn = results(events)["turn"]
    assert turn["status"] == "transport" and turn["attempts"] == 3 and turn["transport"] == "agent"
    assert report.verdict == "fail"


def test_the_usd_ceiling_blocks_further_dispatch(tmp_path: Path) -> None:
    text = plan(
        task("spend", "echo '{\"cost_usd\": 0.75}'"),
        task("spend-more", "echo '{\"cost_usd\": 0.5}'", 'depends_on = ["spend"]'),
        task("never", "touch ../never-ran", 'depends_on = ["spend-more"]'),
        task("epi", "touch ../epi-ran", 'stage = "epilogue"'),
        usd=1.0,
    )
    report, events = run_plan(tmp_path, text)
    by_task = results(events)
    assert report.state.value == "budget" and report.spent_usd == 1.25
    assert by_task["never"]["blocked"] == {"reason": "budget_ceiling"}
    assert by_task["epi"]["blocked"] == {"reason": "budget_ceiling"}
    assert not (tmp_path / "never-ran").exists() and not (tmp_path / "epi-ran").exists()
    assert events[-1] == {**events[-1], "kind": "shutdown", "outcome": "budget"}


def test_declared_outputs_missing_become_a_measured_failure(tmp_path: Path) -> None:
    text = plan(
        task("a", "echo '{\"pass\": true}'", 'emits = ["score"]', "required = false"),
        task("b", "echo '{}'", 'emits_files = ["out/report.txt"]', "required = false"),
        task("c", 'echo \'{"status": "skipped"}\'', "required = false"),
        task("d", "echo '{}'", 'depends_on = ["c"]', "required = false"),
    )
    _, events = run_plan(tmp_path, text)
    by_task = results(events)
    assert by_task["a"]["status"] == "fail" and "score" in by_task["a"]["note"]
    assert by_task["a"]["attempts"] == 1
    assert by_task["b"]["status"] == "fail" and "out/report.txt: absent" in by_task["b"]["note"]
    assert by_task["c"]["status"] == "skipped" and by_task["d"]["status"] == "skipped"


def test_declared_files_reach_every_descendant_read_only_and_namespaced(tmp_path: Path) -> None:
    text = plan(
        task(
            "make",
            "mkdir -p out; echo artifact > out/a.txt; echo '{}'",
            'emits_files = ["out/a.txt"]',
            'isolation = "worktree"',
        ),
        task("mid", "echo '{}'", 'depends_on = ["make"]'),
        task(
            "use",
            'cp "$CRUCIBLE_INPUT_FILES/make/out/a.txt" ../seen.txt && '
            'stat -c %a "$CRUCIBLE_INPUT_FILES/make/out/a.txt" > ../mode.txt; echo "{}"',
            'depends_on = ["mid"]',
        ),
    )
    report, events = run_plan(tmp_path, text)
    assert report.verdict == "pass", results(events)
    assert (tmp_path / "seen.txt").read_text() == "artifact\n"
    assert (tmp_path / "mode.txt").read_text().strip() == "444"
    assert not (tmp_path / "ws" / "out").exists()  # made in a disposable copy


def test_a_declared_file_reached_through_a_link_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside\n")
    text = plan(
        task("sym", f"ln -s {secret} s.txt; echo '{{}}'", 'emits_files = ["s.txt"]', "required = false"),
        task("hard", f"ln {secret} h.txt; echo '{{}}'", 'emits_files = ["h.txt"]', "required = false"),
    )
    _, events = run_plan(tmp_path, text)
    by_task = results(events)
    assert by_task["sym"]["status"] == "fail" and "link" in by_task["sym"]["note"]
    assert by_task["hard"]["status"] == "fail" and "hard links" in by_task["hard"]["note"]


def test_settled_join_sees_every_dependency_status(tmp_path: Path) -> None:
    text = plan(
        task("ok", "echo '{\"v\": 1}'", "required = false"),
        task("bad", 'echo \'{"why": "broken"}\'; exit 1', "required = false"),
        task(
            "review",
            'echo "$CRUCIBLE_INPUTS" > ../review.json; echo "{}"',
            'depends_on = ["ok", "bad"]',
            'join = "settled"',
        ),
    )
    _, _events = run_plan(tmp_path, text)
    seen = json.loads((tmp_path / "review.json").read_text())
    assert seen["ok"]["status"] == "pass" and seen["ok"]["output"] == {"v": 1}
    assert seen["bad"]["status"] == "fail" and seen["bad"]["output"] == {"why": "broken"}


def test_unrunnable_needs_truncate_required_and_skip_advisory(tmp_path: Path) -> None:
    text = plan(task("gpu", "touch ../ran", 'needs = "gpu"'), task("cpu", "touch ../ran"))
    report, events = run_plan(tmp_path, text)
    assert report.state.value == "truncated"
    assert {r["status"] for r in results(events).values()} == {"truncated"}
    assert not (tmp_path / "ran").exists()

    advisory = plan(task("gpu", "echo '{}'", 'needs = "gpu"', "required = false"), task("cpu", "echo '{}'"))
    for name, caps, expected in (("two", frozenset(), "skipped"), ("three", frozenset({"gpu"}), "pass")):
        (tmp_path / name).mkdir()
        report, events = run_plan(tmp_path / name, advisory, caps=caps)
        assert report.verdict == "pass"
        assert results(events)["gpu"]["status"] == expected


def test_agent_turns_hold_the_shared_workspace_alone_and_isolated_ones_overlap(tmp_path: Path) -> None:
    agent = '[[task]]\nname = "{n}"\nkind = "agent"\nprompt = "p"\n{extra}\n'
    text = plan(
        agent.format(n="a1", extra=""),
        agent.format(n="a2", extra=""),
        task("cmd", "echo '{}'"),
        agent.format(n="i1", extra='isolation = "worktree"'),
        agent.format(n="i2", extra='isolation = "worktree"'),
    )
    # Each turn notes any other turn already inside the shared workspace, then waits for a peer.
    stand_in = (
        'if [ "$(ls ../inside 2>/dev/null)" ]; then echo "$CRUCIBLE_TASK" >> ../overlaps; fi; '
        'mkdir -p ../inside; touch "../inside/$CRUCIBLE_TASK"; sleep 0.3; rm "../inside/$CRUCIBLE_TASK"; '
        "echo '{}'"
    )
    shared_only = f'case "$CRUCIBLE_TASK" in i*) echo "{{}}" ;; *) {stand_in} ;; esac'
    report, _ = run_plan(tmp_path, text, agent_cmd=shared_only, jobs=4)
    assert report.verdict == "pass"
    assert not (tmp_path / "overlaps").exists()


def test_the_admitted_line_is_built_from_the_plan_as_the_record_builds_it() -> None:
    """The executor writes `PlanAdmitted.wire_of(plan)`; it must be the event the record gives."""
    from crucible_core.contract import wire
    from crucible_core.plan.events import PlanAdmitted
    from tests.plan.plan_support import parse

    text = plan(
        task("prep", "true"),
        task("wide", "true", 'depends_on = ["prep"]', 'needs = "gpu"', "required = false"),
        task("join", "true", 'depends_on = ["prep", "wide"]', 'join = "settled"'),
        task("report", "true", 'stage = "epilogue"'),
        usd=2,
    )
    admitted = parse(text)
    direct = PlanAdmitted.wire_of(admitted)
    assert direct == PlanAdmitted.of(admitted).as_wire()
    assert wire.encode(direct, 1.0, 1) == wire.encode(PlanAdmitted.of(admitted).as_wire(), 1.0, 1)
    assert [t.stage for t in direct.tasks] == ["iteration", "iteration", "iteration", "epilogue"]


def test_an_inline_graph_runs_on_the_calling_thread_without_a_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The loop runs its graph inline every iteration: no thread pool is made for it, and the
    # unrunnable tasks are worked out once (truncation and advisory skips share the answer).
    import crucible_core.plan.executor as executor_module

    def no_pool(*args: object, **kwargs: object) -> None:
        raise AssertionError("an inline executor made a thread pool")

    asked = []
    real_unrunnable = executor_module.unrunnable_tasks

    def counted(*args: Any, **kwargs: Any) -> set[str]:
        asked.append(1)
        return real_unrunnable(*args, **kwargs)

    import concurrent.futures  # where the executor takes its pool from, when it makes one

    monkeypatch.setattr(concurrent.futures, "ThreadPoolExecutor", no_pool)
    monkeypatch.setattr(executor_module, "unrunnable_tasks", counted)
    report, events = run_plan(
        tmp_path,
        plan(task("a", """echo '{"v": 1}'"""), task("b", "echo ok", 'depends_on = ["a"]')),
        inline=True,
        jobs=1,
    )
    assert report.verdict == "pass"
    assert [r["status"] for r in results(events).values()] == ["pass", "pass"]
    assert report.results["a"].output == {"v": 1}
    assert len(asked) == 1
