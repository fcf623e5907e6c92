"""crucible-plugin-judge-command: CommandJudge (measure_cmd), the task lane's keep-everything judge,
and the judge's measure carried out by a task runner when it needs what this machine lacks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from pathlib import Path

    from crucible_core.api import (
        Judge,
        JudgeContext,
        JudgeFactory,
        Register,
        RemoteMeasure,
        RemoteMeasureFactory,
        TaskRunner,
    )


# The factories import the judges on first use: loading the plugin (every `crucible` command
# does, `crucible plugins` calls this hook) must not import the judges and what they import.
def _command(ctx: JudgeContext) -> Judge:
    from crucible_judge_command.judges import CommandJudge

    return CommandJudge.from_context(ctx)


def _task(ctx: JudgeContext) -> Judge:
    from crucible_judge_command.judges import TaskJudge

    return TaskJudge.from_context(ctx)


@hookimpl
def crucible_register_judges(register: Register[JudgeFactory]) -> None:
    register("command", _command)
    register("task", _task)


def _remote_measure(
    judge: Judge, needs: str, runners: tuple[TaskRunner, ...], workspace: Path, timeout: float
) -> RemoteMeasure | str:
    from crucible_judge_command.remote_measure import measure_on_runners

    return measure_on_runners(judge, needs, runners, workspace, timeout)


@hookimpl
def crucible_register_remote_measures(register: Register[RemoteMeasureFactory]) -> None:
    register("task-runner", _remote_measure)
