"""Task runners: somewhere other than this machine that can run a plan task needing what it lacks.

A plan task names the capability it needs (`needs = "gpu"`). The executor runs a task here when
this machine provides that capability (`--cap`, a service); otherwise it asks the run's task
runners, which plugins contribute through `crucible_register_task_runners`. A runner that
serves the capability and accepts the task runs its attempts somewhere else (a cluster Job, say)
and returns the executor's `Attempt`, so retries, budgets and settling stay the executor's.

A kind whose spec says `returns_workspace` (a wide round's proposal) edits its workspace and
reads the edits afterwards: a runner that takes it must bring the workspace the command left
back into the task's workdir (`CommandShell`'s `returns_workspace`), or refuse the task.

Core never knows what a runner is built on: it sees this Protocol and the factory signature.
A factory returns None when the run did not configure it (no deploy profile, say), so an
installed plugin costs nothing to a run that does not use it.

`crucible plan show` asks the same factories with `TaskRunnerContext.offline` set: it only
wants to know which tasks a runner would take, so the runner it gets answers `provides` and
`refuses` exactly as in a run, but has connected to nothing and is never asked to run, cancel
or reclaim. `runner_for` is the one rule both the executor and `plan show` place a task by.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.plan.ir import Join, Task, ValidPlan
from crucible_core.plan.kinds import Attempt, TaskContext, TaskKindSpec

if TYPE_CHECKING:
    from crucible_core.contract import wire
    from crucible_core.contract.reading import Reading
    from crucible_core.protocols import Judge, MeasureContext


class TaskRunner(Protocol):
    """What the executor asks of a task runner.

    name: shown in notes ("ran on kubernetes").
    provides: the capabilities this runner serves (a task needing one of them may run here).
    refuses: None when the runner can run this task, else why not (the kind cannot run
      remotely, the task declares files the runner cannot bring back, the kind needs its
      workspace back and the runner cannot return it, ...). A refused task is judged as if
      the runner did not exist (truncated or skipped as before).
    run: one attempt of the task; a failure of the runner's own machinery (an API error, a
      pod evicted, never scheduled) is `Outcome.TRANSPORT`, so the executor retries it by its
      policy; what the task itself did (exit code, output) is judged as the kind judges it.
      Called on a worker thread; several attempts may run at once. A remote kind runs as
      `kind.run(context with shell=...)`: the runner lends its `CommandShell`.
    cancel: the run is being stopped: end every attempt in flight now (they return promptly)
      and leave nothing running. Called from another thread than `run`.
    close: the run is over: release what the runner holds (after cancel when stopped).
    """

    name: str

    def provides(self) -> frozenset[str]: ...

    def refuses(self, task: Task, kind: TaskKindSpec) -> str | None: ...

    def run(self, context: TaskContext, kind: TaskKindSpec) -> Attempt: ...

    def cancel(self) -> None: ...

    def close(self) -> None: ...


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class TaskRunnerContext:
    """What a runner factory is handed when a plan run opens.

    run_name: a name for the run (the manifest's or plan file's directory), for labels.
    state_dir: the run's state directory; a runner may derive a stable identity from it so a
      resumed run recognises (and reclaims) what a killed predecessor left behind.
    base_dir: the directory relative paths in `deploy` are resolved against.
    deploy: the manifest's `[deploy]` table, as the settings class the runner that owns it
      registered (None when there is none, or for a plan file).
    deploy_profile: a profile path given on the command line (`plan run --deploy-profile`);
      it takes precedence over what `deploy` names.
    env: the run's environment (KUBECONFIG and the like are read from here, not os.environ).
    emit: writes one event to the run's session log (redacted there); safe from any thread.
    offline: nothing will run (`plan show`): return a runner whose provides() and refuses()
      answer as they would in a run, without reaching any remote system, creating or deleting
      anything; only those two and close() are called. state_dir need not exist.
    """

    run_name: str
    state_dir: Path
    base_dir: Path
    deploy: Any = None
    deploy_profile: Path | None = None
    env: Mapping[str, str] = attrs.field(factory=dict)
    emit: Callable[[wire.Event], Any] | None = None
    offline: bool = False


TaskRunnerFactory = Callable[[TaskRunnerContext], "TaskRunner | None"]


class RemoteMeasure(Protocol):
    """The judge's measure carried out by a task runner, when the judge needs (`needs`) what this
    machine lacks; the engine calls `measure` in place of the judge's own, on the loop's thread.

    where: the runner's name, for the run's notes; note: set by the engine to the run's notes
    (text, level); cancel: an abort or a second Ctrl-C leaves nothing running where it measured.
    """

    note: Callable[[str, str], None]

    @property
    def needs(self) -> str: ...

    @property
    def where(self) -> str: ...

    def measure(self, ctx: MeasureContext) -> Reading: ...

    def cancel(self) -> None: ...


# (judge, needs, the run's opened runners, workspace, timeout) -> a RemoteMeasure on one of them,
# or why none of them takes the measure.
RemoteMeasureFactory = Callable[["Judge", str, "tuple[TaskRunner, ...]", Path, float], "RemoteMeasure | str"]


def open_task_runners(plugins: Any, context: TaskRunnerContext) -> tuple[TaskRunner, ...]:
    """Every registered runner that this run configured, in name order."""
    registry = plugins.registry("task runner")
    runners: list[TaskRunner] = []
    for name in sorted(registry.entries):
        factory: TaskRunnerFactory = registry.entries[name].value
        runner = factory(context)
        if runner is not None:
            runners.append(runner)
    return tuple(runners)


def runner_for(task: Task, kind: TaskKindSpec, runners: tuple[TaskRunner, ...]) -> TaskRunner | None:
    """The first runner (in name order) that serves what the task needs and accepts it.

    Asked only for a task this machine cannot run itself.
    """
    for runner in runners:
        if task.needs in runner.provides() and runner.refuses(task, kind) is None:
            return runner
    return None


def refusals(task: Task, kind: TaskKindSpec, runners: tuple[TaskRunner, ...]) -> list[str]:
    """Why each runner that serves the task's need would not take it ("kubernetes does not take it: ...")."""
    return [
        f"{runner.name} does not take it: {refusal}"
        for runner in runners
        if task.needs in runner.provides() and (refusal := runner.refuses(task, kind)) is not None
    ]


def unrunnable_tasks(
    plan: ValidPlan, provided: frozenset[str], place: Callable[[Task], TaskRunner | None]
) -> set[str]:
    """The tasks a run could never start: each needing what this machine does not provide and
    no runner takes (`place`), and each waiting on such a task unless its join is "settled".

    The one rule the executor truncates a plan by and `plan show` predicts it with.
    """
    tasks = {task.name: task for task in plan.tasks}
    unrunnable: set[str] = set()
    for name in plan.order:
        task = tasks[name]
        if (task.needs not in provided and place(task) is None) or (
            task.join is not Join.SETTLED and any(dep in unrunnable for dep in task.depends_on)
        ):
            unrunnable.add(name)
    return unrunnable
