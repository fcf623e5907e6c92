"""crucible-plugin-judge-command: CommandJudge (measure_cmd) and the task lane's keep-everything judge."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from crucible_core.api import Judge, JudgeContext, JudgeFactory, Register


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
