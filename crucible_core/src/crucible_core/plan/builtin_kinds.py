"""The task kinds crucible-core ships: command and the engine operations.

The shell a kind's command runs through (here, or a task runner's elsewhere) is shared with the
kinds plugins add (crucible-plugin-task-agent's evaluate and agent).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.plan.kinds import Attempt, Outcome, Register, TaskContext, TaskKindSpec
from crucible_core.plan.output import finite_score, last_json_object, reported_cost

if TYPE_CHECKING:  # the supervisor loads when a task first runs, not when the kinds are registered
    from crucible_core import process

ENGINE_OPS = ("propose", "apply", "measure", "grade", "decide")


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class CommandFields:
    command: str


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class EngineFields:
    op: str
    source: str | None = None
    tiebreak: str | None = None


def task_shell(
    context: TaskContext, command: str, extra_env: dict[str, str] | None = None
) -> process.Completed:
    """Run one attempt's command in its workdir under the supervisor, or through the task runner
    that carries it out elsewhere; `extra_env` joins the task's environment."""
    if context.shell is not None:  # a task runner carries the command out elsewhere
        return context.shell(command, {**context.env, **(extra_env or {})}, context.timeout)
    from crucible_core import process

    # The supervisor builds the child's environment from this mapping (it never changes it), so
    # the task's own is passed as it is when nothing joins it.
    env = {**context.env, **extra_env} if extra_env else context.env
    return process.run(command, cwd=context.workdir, env=env, timeout=context.timeout)


def _tail(text: str, limit: int = 400) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def spawn_failure(done: process.Completed, transport: str = "command") -> Attempt | None:
    """A spawn failure is transport-class; anything else the child did is its own result."""
    if done.spawn_error is not None:
        return Attempt(Outcome.TRANSPORT, note=done.describe_failure(), transport=transport)
    return None


def command_attempt(done: process.Completed) -> Attempt:
    """A command task's attempt, from what its child did."""
    transport = spawn_failure(done)
    if transport is not None:
        return transport
    output, _why = last_json_object(done.stdout)
    cost = reported_cost(output)
    if not done.ok:
        note = done.describe_failure()
        if done.stderr.strip():
            note += f": {_tail(done.stderr)}"
        return Attempt(Outcome.FAIL, output=output, note=note, cost_usd=cost)
    return Attempt(Outcome.PASS, output=output, cost_usd=cost, metric=finite_score(output))


def run_command(context: TaskContext) -> Attempt:
    fields: CommandFields = context.task.fields
    return command_attempt(task_shell(context, fields.command))


def _command_of(context: TaskContext) -> str:
    fields: CommandFields = context.task.fields
    return fields.command


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class SupervisedSteps:
    """A kind's attempt as one supervised shell command the executor drives itself: the command
    for a context, and the attempt made of what the child did. Run here (no task runner, no
    service), such an attempt is started and watched on the executor's dispatching thread, with
    the other children it supervises, instead of blocking a pool thread (`kind.run` does both
    steps at once, for every other caller)."""

    command: Callable[[TaskContext], str]
    conclude: Callable[[process.Completed], Attempt]


# By a kind's run function: a plugin that registers "command" with a run of its own keeps it.
SUPERVISED_STEPS: dict[Callable[[TaskContext], Attempt], SupervisedSteps] = {
    run_command: SupervisedSteps(_command_of, command_attempt),
}


def _engine_runner(op: str) -> Callable[[TaskContext], Attempt]:
    def run(context: TaskContext) -> Attempt:
        if context.engine is None:
            # Validation refuses engine kinds without a World and Judge; reaching here is a bug.
            return Attempt(Outcome.TRANSPORT, note=f"no engine to run {op}", transport="other")
        return context.engine.run_operation(op, context)

    return run


def register_core_kinds(register: Register) -> None:
    register(
        "command",
        TaskKindSpec(
            "command", CommandFields, run_command, describe="a shell command in the workspace", remote=True
        ),
    )
    for op in ENGINE_OPS:
        register(
            f"engine_{op}",
            TaskKindSpec(
                f"engine_{op}",
                EngineFields,
                _engine_runner(op),
                exclusive=True,
                may_emit=False,
                engine=True,
                allows_session=op == "propose",
                allows_settled_join=False,
                describe=f"the engine's {op} operation (needs a World and a frozen Judge)",
            ),
        )
