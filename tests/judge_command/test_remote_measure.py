"""The judge command plugin's remote measure: retries of lost attempts, and a judge that ignores the
shell it is lent. The runner here is an in-process stand-in for a cluster (the real Job runner
is driven end to end in tests/deploy_kubernetes/test_measure_jobs.py)."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path

import attrs

from crucible_core.contract.reading import Reading, parse_measure_output
from crucible_core.plan.ir import Task
from crucible_core.plan.kinds import Attempt, TaskContext, TaskKindSpec
from crucible_core.process import Completed
from crucible_core.protocols import MeasureContext
from crucible_judge_command.remote_measure import (
    MEASURE_KIND,
    RemoteMeasure,
    measure_on_runners,
    measure_task,
)


@attrs.define
class ScriptedRunner:
    """Carries out each command by the next scripted result: an exit code and stdout, or a loss."""

    script: list[tuple[int, str] | str]
    name: str = "cluster"
    commands: list[tuple[str, dict[str, str]]] = attrs.field(factory=list)
    cancelled: int = 0

    def provides(self) -> frozenset[str]:
        return frozenset({"gpu"})

    def refuses(self, task: Task, kind: TaskKindSpec) -> str | None:
        return None

    def run(self, context: TaskContext, kind: TaskKindSpec) -> Attempt:
        def shell(command: str, env: Mapping[str, str], timeout: float) -> Completed:
            self.commands.append((command, dict(env)))
            step = self.script.pop(0)
            if isinstance(step, str):
                return Completed(-1, "", "", False, 0.0, spawn_error=step)
            return Completed(step[0], step[1], "", False, 0.0)

        return kind.run(attrs.evolve(context, shell=shell))

    def cancel(self) -> None:
        self.cancelled += 1

    def close(self) -> None:
        pass


@attrs.frozen
class ShellJudge:
    """A judge that runs its one command through the lent shell (as the command judge does)."""

    needs: str = "gpu"
    gate: str = "score"
    scored: bool = True

    def measure(self, ctx: MeasureContext) -> Reading:
        assert ctx.shell is not None
        env = {"CRUCIBLE_BEST_SCORE": str(ctx.best_score)} if ctx.best_score is not None else {}
        done = ctx.shell("sh bench.sh", env, 60.0)
        if done.spawn_error:
            return Reading.invalid(done.spawn_error, broken=True)
        return parse_measure_output(done.stdout, done.exit_code)


@attrs.frozen
class LocalJudge:
    """A judge that declares a need but measures here anyway (a plugin bug the engine reports)."""

    needs: str = "gpu"
    gate: str = "score"
    scored: bool = True

    def measure(self, ctx: MeasureContext) -> Reading:
        return Reading(valid=True, score=1.0)


def _remote(
    runner: ScriptedRunner, judge: ShellJudge | LocalJudge, notes: list[tuple[str, str]]
) -> RemoteMeasure:
    return RemoteMeasure(
        runner, judge, "gpu", Path("."), 60.0, note=lambda text, level: notes.append((text, level))
    )


def test_lost_attempts_are_tried_again_and_the_engine_numbers_reach_the_command() -> None:
    runner = ScriptedRunner(["evicted", (0, '{"valid": true, "score": 7}')])
    notes: list[tuple[str, str]] = []
    reading = _remote(runner, ShellJudge(), notes).measure(MeasureContext(iteration=3, best_score=5.0))
    assert reading.valid and reading.score == 7
    assert [env for _, env in runner.commands] == [{"CRUCIBLE_BEST_SCORE": "5.0"}] * 2
    assert notes == [("measure on cluster: evicted; trying again", "warn")]


def test_a_measure_lost_past_its_retries_reads_broken_and_a_failing_command_is_a_verdict() -> None:
    notes: list[tuple[str, str]] = []
    broken = _remote(ScriptedRunner(["gone", "gone", "gone"]), ShellJudge(), notes).measure(
        MeasureContext(iteration=1)
    )
    assert broken.broken and "could not be carried out on cluster (3 attempts): gone" in broken.note
    runner = ScriptedRunner([(2, '{"valid": true, "score": 9}')])
    failed = _remote(runner, ShellJudge(), notes).measure(MeasureContext(iteration=1))
    assert not failed.valid and len(runner.commands) == 1  # the command's own failure: not retried


def test_a_judge_that_ignores_the_lent_shell_is_reported_once() -> None:
    notes: list[tuple[str, str]] = []
    remote = _remote(ScriptedRunner([]), LocalJudge(), notes)
    for _ in range(2):
        assert remote.measure(MeasureContext(iteration=1)).score == 1.0
    assert len(notes) == 1 and "measured on this machine, not on cluster" in notes[0][0]


def test_the_measure_asks_a_runner_for_the_workspace_as_it_stands() -> None:
    task = measure_task("gpu", 30.0)
    assert (task.name, task.needs, task.timeout) == ("measure", "gpu", 30.0)
    assert MEASURE_KIND.remote and MEASURE_KIND.live_workdir


def test_the_measure_goes_to_the_first_runner_that_serves_the_need_and_says_why_others_do_not() -> None:
    class Refusing(ScriptedRunner):
        def refuses(self, task: Task, kind: TaskKindSpec) -> str | None:
            return "no workspace shipping"

    class CpuOnly(ScriptedRunner):
        def provides(self) -> frozenset[str]:
            return frozenset({"cpu"})

    elsewhere = CpuOnly([], name="cpu-only")
    refusing, taking = Refusing([], name="picky"), ScriptedRunner([], name="cluster")
    made = measure_on_runners(ShellJudge(), "gpu", (elsewhere, refusing, taking), Path("."), 60.0)
    assert isinstance(made, RemoteMeasure) and made.where == "cluster" and made.needs == "gpu"
    why = measure_on_runners(ShellJudge(), "gpu", (elsewhere, refusing), Path("."), 60.0)
    assert why == "cpu-only serves only cpu; picky does not take it: no workspace shipping"


def test_without_this_plugin_a_judge_needing_a_runner_is_refused_naming_it() -> None:
    from crucible_core.plugins import load_plugins
    from crucible_core.run.opened_runners import remote_measure_on

    installed = sorted(ep.name for ep in entry_points(group="crucible"))
    plugins = load_plugins(names=[name for name in installed if name != "judge_command"])
    why = remote_measure_on(plugins, ShellJudge(), "gpu", (ScriptedRunner([]),), Path("."), 60.0)
    assert isinstance(why, str) and "pip install crucible-plugin-judge-command" in why
    made = remote_measure_on(
        load_plugins(names=installed), ShellJudge(), "gpu", (ScriptedRunner([]),), Path("."), 60.0
    )
    assert isinstance(made, RemoteMeasure)
