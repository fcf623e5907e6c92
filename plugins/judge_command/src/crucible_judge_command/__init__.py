"""crucible-plugin-judge-command: CommandJudge (measure_cmd) and the task lane's keep-everything judge."""

from __future__ import annotations

from crucible_core.hookspecs import hookimpl
from crucible_core.protocols import JudgeFactory
from crucible_core.registry import Register


@hookimpl
def crucible_register_judges(register: Register[JudgeFactory]) -> None:
    from crucible_judge_command.judges import CommandJudge, TaskJudge

    register("command", CommandJudge.from_context)
    register("task", TaskJudge.from_context)
