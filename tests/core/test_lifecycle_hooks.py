"""Lifecycle hooks fire in the documented order on every way a run ends, and a faulty plugin
(observer, reporter, after-turn or run-end hook) cannot end or corrupt a run.

Each test registers a recording plugin on a fresh plugin manager next to the real standard
plugins, and runs the real engine in-process over a copy of examples/counter.
"""

from __future__ import annotations

import os
import signal
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from crucible_core.hookspecs import hookimpl
from crucible_core.plugins import Plugins, load_plugins
from crucible_core.run.budget import Budget
from crucible_core.run.lifecycle import RunContext, RunEnd, TurnAdditions, TurnContext
from crucible_core.session.entry import execute
from crucible_core.session.request import SessionRequest
from crucible_core.session_log import read_events
from tests.cli_support import crucible_env, run_crucible

STANDARD = [
    "core",
    "world_git",
    "judge_command",
    "backend_local",
    "workflow_starlark",
    "lane_playbook",
    "task_agent",
]


class Recorder:
    """A plugin module's hooks, appending what they hear to `calls` in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.contexts: list[RunContext] = []
        self.on_before_turn: Callable[[int], TurnAdditions | None] = lambda _i: None

    def module(self) -> types.ModuleType:
        module = types.ModuleType("recording_plugin")

        def crucible_run_start(context: RunContext) -> None:
            self.contexts.append(context)
            self.calls.append(("run_start", context.resumed))

        def crucible_before_turn(context: TurnContext) -> TurnAdditions | None:
            self.calls.append(("before_turn", context.iteration))
            return self.on_before_turn(context.iteration)

        def crucible_after_turn(context: TurnContext, result: Any) -> None:
            self.calls.append(("after_turn", context.iteration, result is not None and result.ok))

        def crucible_run_end(end: RunEnd) -> None:
            self.contexts.append(end.run)
            self.calls.append(("run_end", end.outcome, end.iterations))

        def crucible_session_event(event: Any) -> None:
            if event["kind"] == "row":
                self.calls.append(("row", event["row"]["iter"]))

        for function in (
            crucible_run_start,
            crucible_before_turn,
            crucible_after_turn,
            crucible_run_end,
            crucible_session_event,
        ):
            setattr(module, function.__name__, hookimpl(function))
        return module


def fresh_plugins(*modules: types.ModuleType) -> Plugins:
    plugins = load_plugins(names=STANDARD)
    for index, module in enumerate(modules):
        name = f"test_plugin_{index}"
        plugins.register_module(module, name=name, distribution=f"crucible-plugin-{name}", version="0")
    return plugins


def run(plugins: Plugins, manifest: Path, iterations: int, *, resume: bool = False, ui: str = "headless"):
    return execute(
        plugins, SessionRequest(manifest=manifest, budget=Budget(iterations=iterations), ui=ui, resume=resume)
    )


def log(manifest: Path) -> list[dict[str, Any]]:
    return list(read_events(manifest.parent / "state" / "session.jsonl"))


def turns(*iterations: int) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for i in iterations:
        out += [("before_turn", i), ("after_turn", i, True), ("row", i)]
    return out


def test_normal_end_order_and_context(example) -> None:
    manifest = example("counter")
    recorder = Recorder()
    result = run(fresh_plugins(recorder.module()), manifest, 2)
    assert result.outcome == "finished"
    assert recorder.calls == [
        ("run_start", False),
        ("row", 0),  # the baseline comes after run start
        *turns(1, 2),
        ("run_end", "finished", 2),
    ]
    start, end = recorder.contexts
    assert start == end and start.workspace == manifest.parent / "workspace"
    assert start.state_dir == manifest.parent / "state" and start.private_dir.is_dir()
    assert start.manifest.path == manifest and start.run_id
    kinds = [e["kind"] for e in log(manifest)]
    assert kinds[-1] == "shutdown" and kinds.count("summary") == 1


def test_sigterm_then_resume_pair_start_and_end_each_time(example) -> None:
    manifest = example("counter")
    recorder = Recorder()

    def terminate_on_second(iteration: int) -> None:
        if iteration == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # a real signal, handled by the run's handler

    recorder.on_before_turn = terminate_on_second
    first = run(fresh_plugins(recorder.module()), manifest, 4)
    assert first.outcome == "stopped"
    # the signal stops the run at the next iteration head: the running turn finishes and is judged
    assert recorder.calls == [("run_start", False), ("row", 0), *turns(1, 2), ("run_end", "stopped", 2)]

    again = Recorder()
    resumed = run(fresh_plugins(again.module()), manifest, 4, resume=True)
    assert resumed.outcome == "finished"
    assert again.calls == [("run_start", True), *turns(3, 4), ("run_end", "finished", 4)]
    assert again.contexts[0].run_id == recorder.contexts[0].run_id  # one recorded run, one id
    summary = [e for e in log(manifest) if e["kind"] == "summary"][-1]
    assert summary["iterations"] == 4 and summary["kept"] == 4


def test_operator_stop_ends_with_run_end(example) -> None:
    manifest = example("counter")
    crucible = Path(sys.executable).parent / "crucible"
    manifest.write_text(
        manifest.read_text().replace(
            'agent_cmd = "./bump.sh"', f'agent_cmd = "./bump.sh && {crucible} stop -m ../crucible.toml"'
        )
    )
    recorder = Recorder()
    result = run(fresh_plugins(recorder.module()), manifest, 5)
    assert result.outcome == "stopped"
    assert recorder.calls == [("run_start", False), ("row", 0), *turns(1), ("run_end", "stopped", 1)]


def test_an_error_ends_with_run_end(example) -> None:
    manifest = example("counter")
    # the world cannot roll back (its restore_cmd fails) after the rejected turn: the run errors
    # (a proposer wrecking .git no longer does: the world rebuilds it from its private record)
    manifest.write_text(
        manifest.read_text().replace('agent_cmd = "./bump.sh"', 'agent_cmd = "exit 1"')
        + '\n[world]\nsnapshot_cmd = "echo live"\nrestore_cmd = "exit 3"\n'
    )
    recorder = Recorder()
    result = run(fresh_plugins(recorder.module()), manifest, 3)
    assert result.outcome == "error"
    assert recorder.calls[:3] == [("run_start", False), ("row", 0), ("before_turn", 1)]
    assert recorder.calls[-1][:2] == ("run_end", "error")
    assert [c[0] for c in recorder.calls].count("run_end") == 1
    assert log(manifest)[-1]["kind"] == "shutdown"


def test_before_turn_adds_env_and_mcp_servers(example, tmp_path: Path) -> None:
    manifest = example("counter")
    seen = tmp_path / "seen.txt"
    manifest.write_text(
        manifest.read_text().replace(
            'agent_cmd = "./bump.sh"', f'agent_cmd = "./bump.sh && echo $FROM_PLUGIN >> {seen}"'
        )
        + DISCLOSED_FROM_PLUGIN  # a plugin's env is a grant: the disclosure covers it
    )
    recorder = Recorder()
    recorder.on_before_turn = lambda i: TurnAdditions(
        env={"FROM_PLUGIN": f"turn-{i}", "CRUCIBLE_ITERATION": "spoofed"},
        mcp_servers={"broker": {"url": "http://127.0.0.1:1/mcp"}},
    )
    result = run(fresh_plugins(recorder.module()), manifest, 2)
    assert result.outcome == "finished"
    assert seen.read_text().split() == ["turn-1", "turn-2"]
    notes = [e["msg"] for e in log(manifest) if e["kind"] == "note"]
    assert sum("may not set CRUCIBLE_ITERATION" in n for n in notes) == 2


DISCLOSED_FROM_PLUGIN = """
[[capabilities.secret]]
name = "FROM_PLUGIN"
context = "agent"
system = "test"
scope = "a per-turn marker"
"""


@pytest.mark.parametrize(
    ("disclosure", "missing"),
    [
        ("", "no [agent].env entry or [[capabilities.secret]] names FROM_PLUGIN"),
        (DISCLOSED_FROM_PLUGIN.replace('"agent"', '"broker"'), "discloses it as broker-held"),
    ],
)
def test_env_a_plugin_adds_outside_the_disclosure_refuses_the_run(
    example, tmp_path: Path, disclosure: str, missing: str
) -> None:
    manifest = example("counter")
    seen = tmp_path / "seen.txt"
    manifest.write_text(
        manifest.read_text().replace(
            'agent_cmd = "./bump.sh"', f'agent_cmd = "./bump.sh && echo $FROM_PLUGIN >> {seen}"'
        )
        + disclosure
    )
    recorder = Recorder()
    recorder.on_before_turn = lambda i: TurnAdditions(env={"FROM_PLUGIN": "tok-secret-value"})
    result = run(fresh_plugins(recorder.module()), manifest, 2)
    assert result.outcome == "error" and result.exit_code == 4
    assert "plugin crucible-plugin-test_plugin_0 adds FROM_PLUGIN" in result.reason
    assert missing in result.reason
    assert not seen.exists()  # no turn ran with the undisclosed value
    assert ("after_turn", 1, False) not in recorder.calls and recorder.calls[-1][:2] == ("run_end", "error")


def test_a_before_turn_hook_that_raises_ends_the_run_naming_the_plugin(example) -> None:
    manifest = example("counter")
    recorder = Recorder()

    def refuse(_iteration: int) -> None:
        raise ConnectionError("broker unreachable")

    recorder.on_before_turn = refuse
    result = run(fresh_plugins(recorder.module()), manifest, 2)
    assert result.outcome == "error"
    assert "crucible-plugin-test_plugin_0" in result.reason and "broker unreachable" in result.reason
    assert recorder.calls[-1] == ("run_end", "error", 0)


def raising_module(**hooks: Callable[..., Any]) -> types.ModuleType:
    module = types.ModuleType("faulty_plugin")
    for name, function in hooks.items():
        setattr(module, name, hookimpl(function))
    return module


def test_a_raising_observer_is_disabled_and_the_run_stays_correct(example) -> None:
    manifest = example("counter")
    seen: list[str] = []

    def observe(event: Any) -> None:
        seen.append(event["kind"])
        if event["kind"] == "row" and event["row"]["iter"] == 1:
            raise RuntimeError("dashboard down")

    recorder = Recorder()
    plugins = fresh_plugins(raising_module(crucible_session_event=observe), recorder.module())
    result = run(plugins, manifest, 3)
    assert result.outcome == "finished" and result.exit_code == 0
    events = log(manifest)
    summary = next(e for e in events if e["kind"] == "summary")
    assert (summary["iterations"], summary["kept"]) == (3, 3)
    faults = [e["msg"] for e in events if e["kind"] == "note" and "dashboard down" in e["msg"]]
    assert len(faults) == 1 and "crucible-plugin-test_plugin_0" in faults[0]
    assert seen.count("row") == 2  # baseline and iteration 1; nothing after it raised
    assert [c for c in recorder.calls if c[0] == "row"] == [("row", i) for i in range(4)]  # others unaffected


def test_a_raising_reporter_is_disabled_and_the_run_completes(example) -> None:
    manifest = example("counter")

    class Boom:
        def on_event(self, event: Any) -> None:
            if event["kind"] == "row":
                raise ValueError("cannot draw")

        def close(self) -> None:
            raise AssertionError("a disabled reporter is not closed")

    plugins = fresh_plugins(
        raising_module(crucible_register_reporters=lambda register: register("boom", lambda ctx: Boom()))
    )
    result = run(plugins, manifest, 2, ui="boom")
    assert result.exit_code == 0
    events = log(manifest)
    assert next(e for e in events if e["kind"] == "summary")["iterations"] == 2
    faults = [e["msg"] for e in events if e["kind"] == "note" and "cannot draw" in e["msg"]]
    assert len(faults) == 1 and "reporter 'boom'" in faults[0]


def test_after_turn_and_run_end_faults_are_noted_not_fatal(example) -> None:
    manifest = example("counter")

    def after(context: Any, result: Any) -> None:
        raise KeyError("after")

    def end(end: Any) -> None:
        raise KeyError("end")

    result = run(fresh_plugins(raising_module(crucible_after_turn=after, crucible_run_end=end)), manifest, 2)
    assert result.outcome == "finished"
    notes = [e["msg"] for e in log(manifest) if e["kind"] == "note"]
    assert sum("crucible_after_turn raised KeyError" in n for n in notes) == 2
    assert sum("crucible_run_end raised KeyError" in n for n in notes) == 1


@pytest.mark.parametrize("ui", ["nope"])
def test_an_unknown_reporter_fails_before_anything_is_created(example, ui: str) -> None:
    manifest = example("counter")
    from crucible_core.errors import PluginError

    with pytest.raises(PluginError) as err:
        run(fresh_plugins(), manifest, 1, ui=ui)
    assert "unknown reporter 'nope' in --ui" in err.value.render() and "console" in err.value.render()
    assert not (manifest.parent / "state").exists() and not (manifest.parent / "workspace").exists()


def test_before_turn_additions_reach_the_turn_first_server_name_wins(tmp_path: Path) -> None:
    from crucible_core.protocols import Turn
    from crucible_core.run.lifecycle import Lifecycle

    first = raising_module(
        crucible_before_turn=lambda context: TurnAdditions(
            mcp_servers={"broker": {"url": "one"}}, env={"A": "1"}
        )
    )
    second = raising_module(
        crucible_before_turn=lambda context: TurnAdditions(
            mcp_servers={"broker": {"url": "two"}, "tools": {"command": "t"}}, env={"B": "2"}
        )
    )
    plugins = fresh_plugins(first, second)
    notes: list[str] = []
    context = RunContext(None, tmp_path, tmp_path, tmp_path, "run", False)  # type: ignore[arg-type]
    lifecycle = Lifecycle(plugins, context, note=notes.append)
    turn = Turn(
        iteration=3, prompt="p", workspace=tmp_path, env={"PATH": "/bin"}, deadline_seconds=None, emit=print
    )
    given = lifecycle.before_turn(turn)
    # pluggy calls the later-registered plugin first, so "two" is the first to claim "broker"
    assert given.mcp_servers == {"broker": {"url": "two"}, "tools": {"command": "t"}}
    assert given.env == {"PATH": "/bin", "A": "1", "B": "2"}
    assert len(notes) == 1 and "crucible-plugin-test_plugin_0" in notes[0] and "'broker'" in notes[0]


def test_a_raising_observer_called_first_does_not_cost_the_others_an_event(example) -> None:
    """pluggy stops a call at the first exception: the plugins after the faulty one still hear it."""
    manifest = example("counter")

    def observe(event: Any) -> None:
        if event["kind"] == "row" and event["row"]["iter"] == 1:
            raise RuntimeError("dashboard down")

    recorder = Recorder()
    # registered last, so pluggy calls it first
    result = run(
        fresh_plugins(recorder.module(), raising_module(crucible_session_event=observe)), manifest, 3
    )
    assert result.exit_code == 0
    assert [c for c in recorder.calls if c[0] == "row"] == [("row", i) for i in range(4)]


def test_implementations_taking_fewer_arguments_than_the_spec_are_called(example) -> None:
    """pluggy hands an implementation only the arguments it names (crucible called them with all)."""
    manifest = example("counter")
    heard: list[str] = []
    plugins = fresh_plugins(
        raising_module(
            crucible_run_start=lambda: heard.append("start"),
            crucible_after_turn=lambda context: heard.append(f"after {context.iteration}"),
            crucible_run_end=lambda: heard.append("end"),
            crucible_session_event=lambda: heard.append("event"),
        )
    )
    result = run(plugins, manifest, 2)
    assert result.exit_code == 0
    assert [h for h in heard if h != "event"] == ["start", "after 1", "after 2", "end"]
    assert heard.count("event") > 5
    notes = [e["msg"] for e in log(manifest) if e["kind"] == "note"]
    assert not any("raised" in n for n in notes)


def test_a_hook_wrapper_around_before_turn_runs_and_sees_every_plugins_additions(
    example, tmp_path: Path
) -> None:
    manifest = example("counter")
    seen = tmp_path / "seen.txt"
    manifest.write_text(
        manifest.read_text().replace(
            'agent_cmd = "./bump.sh"', f'agent_cmd = "./bump.sh && echo $WRAPPED >> {seen}"'
        )
        + '\n[[capabilities.secret]]\nname = "WRAPPED"\ncontext = "agent"\nsystem = "test"\nscope = "a test value"\n'
    )
    wrapped: list[int] = []

    def crucible_before_turn(context: TurnContext) -> Any:
        results = yield  # every other plugin's TurnAdditions
        wrapped.append(len(results))
        return [*results, TurnAdditions(env={"WRAPPED": f"turn-{context.iteration}"})]

    module = types.ModuleType("wrapping_plugin")
    module.crucible_before_turn = hookimpl(wrapper=True)(crucible_before_turn)  # type: ignore[attr-defined]
    recorder = Recorder()
    recorder.on_before_turn = lambda i: TurnAdditions(mcp_servers={"recorded": {"command": "true"}})
    result = run(fresh_plugins(recorder.module(), module), manifest, 2)
    assert result.exit_code == 0, result.reason
    assert wrapped == [1, 1]  # it wrapped the recorder's implementation, once per turn
    assert seen.read_text().split() == ["turn-1", "turn-2"]  # what it added reached the turn


def test_crucible_trace_plugins_prints_each_hook_call(example) -> None:
    manifest = example("counter")
    done = run_crucible(
        "run", "--manifest", manifest, "--iterations", "1", "--ui", "headless",
        env=crucible_env(CRUCIBLE_TRACE_PLUGINS="1"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("crucible: hook ")]
    hooks = {line.split()[2] for line in lines}
    assert {
        "crucible_register_worlds",
        "crucible_run_start",
        "crucible_before_turn",
        "crucible_run_end",
    } <= hooks
    assert all(line.endswith(" ms") or " ms raised " in line for line in lines)


def graph_listener(calls: list[tuple[Any, ...]], adds: dict[str, str] | None = None) -> types.ModuleType:
    """Hooks that record what a playbook or a plan file tells them (the lane, the task of each turn)."""
    module = types.ModuleType("graph_listener")

    def crucible_run_start(context: RunContext) -> None:
        calls.append(("run_start", context.lane, context.manifest is not None, context.broker))

    def crucible_before_turn(context: TurnContext) -> TurnAdditions | None:
        calls.append(("before_turn", context.task))
        return TurnAdditions(env=adds) if adds else None

    def crucible_after_turn(context: TurnContext, result: Any) -> None:
        calls.append(("after_turn", context.task, result is not None and result.ok))

    def crucible_run_end(end: RunEnd) -> None:
        calls.append(("run_end", end.run.lane, end.outcome, end.iterations))

    for function in (crucible_run_start, crucible_before_turn, crucible_after_turn, crucible_run_end):
        setattr(module, function.__name__, hookimpl(function))
    return module


def play(plugins: Plugins, manifest: Path):
    return execute(
        plugins, SessionRequest(manifest=manifest, budget=Budget(max_cost=1, max_time=300), ui="headless")
    )


def test_a_playbook_fires_run_start_and_end_once_and_the_turn_hooks_around_its_agent_task(example) -> None:
    calls: list[tuple[Any, ...]] = []
    result = play(fresh_plugins(graph_listener(calls)), example("playbook"))
    assert (result.outcome, result.exit_code) == ("finished", 0)
    assert calls == [
        ("run_start", "playbook", True, None),  # a playbook has no broker
        ("before_turn", "summarize"),
        ("after_turn", "summarize", True),
        ("run_end", "playbook", "finished", 1),
    ]


def test_env_a_plugin_adds_to_a_playbook_turn_outside_the_disclosure_fails_that_task(example) -> None:
    manifest = example("playbook")
    calls: list[tuple[Any, ...]] = []
    result = play(fresh_plugins(graph_listener(calls, {"FROM_PLUGIN": "tok-secret-value"})), manifest)
    assert result.exit_code == 4  # the playbook is invalid
    (summarize,) = [e for e in log(manifest) if e["kind"] == "task_result" and e["task"] == "summarize"]
    assert summarize["status"] == "fail" and "adds FROM_PLUGIN" in summarize["note"]
    assert summarize["attempts"] == 1  # a refusal is not retried
    assert not any(call[0] == "after_turn" for call in calls)  # no turn ran with the value
    assert "tok-secret-value" not in (manifest.parent / "state" / "session.jsonl").read_text()


def test_a_plan_file_fires_run_start_and_end_with_no_manifest(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'version = 1\n[budget]\nusd = 1.0\n[[task]]\nname = "a"\nkind = "command"\ncommand = "true"\n'
    )
    (tmp_path / "ws").mkdir()
    calls: list[tuple[Any, ...]] = []
    from functools import partial

    from crucible_lane_plan.lane import PlanFile, prepare_plan_file

    result = execute(
        fresh_plugins(graph_listener(calls)),
        SessionRequest(
            prepare_lane=partial(prepare_plan_file, PlanFile(plan, workspace=tmp_path / "ws")), ui="headless"
        ),
    )
    assert (result.outcome, result.exit_code) == ("finished", 0)
    assert calls == [("run_start", "plan", False, None), ("run_end", "plan", "finished", 1)]


def test_commit_kept_hears_each_kept_commit_after_its_row(example) -> None:
    manifest = example("counter")
    heard: list[tuple[Any, ...]] = []
    module = types.ModuleType("kept_plugin")

    def crucible_commit_kept(kept: Any) -> None:
        rows = [e["row"] for e in log(manifest) if e["kind"] == "row"]
        heard.append((kept.iteration, kept.sha, kept.summary, rows[-1]["iter"], kept.run.lane))
        raise RuntimeError("an observer's bug")  # noted; the run goes on

    module.crucible_commit_kept = hookimpl(crucible_commit_kept)  # type: ignore[attr-defined]
    result = run(fresh_plugins(module), manifest, 2)

    assert result.outcome == "finished"
    kept = {
        e["row"]["iter"]: e["row"]["sha"] for e in log(manifest) if e["kind"] == "row" and e["row"].get("sha")
    }
    assert heard == [(1, kept[1], "value=1", 1, "loop"), (2, kept[2], "value=2", 2, "loop")]
    notes = [e["msg"] for e in log(manifest) if e["kind"] == "note"]
    assert sum("crucible_commit_kept" in n and "an observer's bug" in n for n in notes) == 2
