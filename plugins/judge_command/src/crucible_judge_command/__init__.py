"""crucible-plugin-judge-command: CommandJudge (measure_cmd) and the task lane's keep-everything judge."""

from __future__ import annotations

from crucible_core.api import JudgeFactory, Register, hookimpl


@hookimpl
def crucible_register_judges(register: Register[JudgeFactory]) -> None:
    from crucible_judge_command.judges import CommandJudge, TaskJudge

    register("command", CommandJudge.from_context)
    register("task", TaskJudge.from_context)
