"""One iteration of a scored workflow: the pack's own graph, run through the loop's engine operations.

The loop shell (gates, budgets, rows, keep/discard, resume) is the default loop's; only the
graph of one iteration differs. Engine tasks (propose, apply, measure, grade, decide) are the
same `IterationOperations` the built-in graph calls, run on the loop's thread; the author's
other tasks (critics, smoke tests, evaluations) run on the executor's pool, in the shared
workspace between the engine steps or in disposable copies when isolated.

An iteration writes exactly one row, as the default loop's does: the engine operations write
it when the graph reaches them; when a non-engine task fails and blocks the rest, the
candidate is discarded here with the task's note. An agent transport failure on propose is the
exception, as in the default loop: it writes no row and does not spend the iteration.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.errors import ResumeConflict
from crucible_core.manifest.loader import LoadedManifest
from crucible_core.manifest.paths import RunPaths, write_atomic
from crucible_core.plan import ir
from crucible_core.plan.executor import ExecutorConfig, PlanExecutor, PlanReport
from crucible_core.plan.kinds import AgentTurns, TaskKindSpec
from crucible_core.plan.states import TaskStatus
from crucible_core.registry import Registry
from crucible_core.run.context import LoopExit, Run
from crucible_core.run.injects import refresh_frozen
from crucible_core.run.iteration import IterationOperations
from crucible_core.run.steps import reject

if TYPE_CHECKING:
    from crucible_core.plugins import Plugins
    from crucible_core.run.engine import Engine

SCRATCH_DIR = "workflow"  # under the private dir: one iteration's captured task files


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class AuthoredGraph:
    """An admitted scored workflow: the validated graph, the kinds it uses, its frozen TOML."""

    plan: ir.ValidPlan
    kinds: Registry[TaskKindSpec]
    artifact: str

    def run_iteration(self, engine: Engine, run: Run, iteration: int) -> LoopExit | None:
        """What the loop's iteration graph does when the pack authored one (run/iteration.py
        asks through this method, so the two modules do not import each other)."""
        return run_authored_iteration(engine, run, iteration, self)


def admit_authored_graph(
    plugins: Plugins, loaded: LoadedManifest, params: Mapping[str, str]
) -> AuthoredGraph | None:
    """The manifest's scored workflow, compiled and validated; None when it has none (or an
    empty one), so the built-in graph runs. A playbook never gets here (`crucible run` routes it).

    Two runtime policies are applied to the compiled graph, and neither reaches the hashed
    artifact: engine tasks are never retried by the executor (an agent transport failure is the
    loop shell's to retry, without spending the iteration), and the graph has no budget of its
    own (the loop's USD cap is checked at every iteration head and counts the graph's spend).
    """
    from crucible_core.workflow.lanes import SCORED_WORKFLOW_TYPES
    from crucible_core.workflow.pack import (
        declared_lane,
        declared_params,
        effective_workflow,
        plan_data,
        to_toml,
    )

    if declared_lane(plugins, loaded) not in SCORED_WORKFLOW_TYPES:
        return None  # the built-in graph: the plan file loader is never needed (and not imported)
    from crucible_core.plan.load import plan_from_data
    from crucible_core.plan.validate import validate

    kinds: Registry[TaskKindSpec] = plugins.registry("task kind")
    declared = declared_params(plugins, loaded).get("properties", {})
    # Other --param values belong to [outputs] targets; the workflow gets the ones it declares.
    supplied = {name: value for name, value in params.items() if name in declared}
    document = effective_workflow(plugins, loaded, supplied)
    if document is None or not document["task"]:
        return None
    source = str(loaded.path)
    plan = plan_from_data(plan_data(document, 1.0), kinds, source=source)
    tasks = tuple(
        attrs.evolve(task, retries=0) if kinds.entries[task.kind].value.engine else task
        for task in plan.tasks
    )
    plan = attrs.evolve(plan, budget=ir.Budget(math.inf), tasks=tasks)
    valid = validate(plan, kinds, owns_world_and_judge=True, source=source)
    return AuthoredGraph(valid, kinds, to_toml(document))


def freeze_artifact(graph: AuthoredGraph, paths: RunPaths, *, resume: bool) -> None:
    """Write the compiled workflow to the state directory; a resume must run the same one."""
    from crucible_core.workflow.pack import ARTIFACT_NAME

    frozen = paths.state_dir / ARTIFACT_NAME
    if resume and frozen.is_file() and frozen.read_text(encoding="utf-8") != graph.artifact:
        raise ResumeConflict(
            f"the compiled workflow differs from the one this run froze in {frozen}",
            hint="resume with the same workflow.star and --param values (nothing was changed)",
        )
    paths.state_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(frozen, graph.artifact.encode("utf-8"), durable=False)


def run_authored_iteration(engine: Engine, run: Run, iteration: int, graph: AuthoredGraph) -> LoopExit | None:
    """Run the authored graph once for `iteration`; the loop exit it produced, if any."""
    from crucible_core.run.engine import engine_environment

    operations = IterationOperations(engine, run, iteration)
    rows_before = len(run.rows)
    scratch = engine.paths.private_dir / SCRATCH_DIR
    shutil.rmtree(scratch, ignore_errors=True)  # files an earlier iteration's tasks declared are its own
    scratch.mkdir(mode=0o700, parents=True, exist_ok=True)

    def before_task(root: Path) -> None:
        refreshed = refresh_frozen(engine.loaded.injects, root)
        if refreshed and root == engine.paths.workspace:
            engine.note(f"re-copied frozen injects the candidate had changed: {', '.join(refreshed)}", "warn")

    env = engine_environment()
    config = ExecutorConfig(
        workspace=engine.paths.workspace,
        state_dir=scratch,
        engine=operations,
        env=env,
        iteration=iteration,
        inline_engine=True,
        ends_run=False,  # plan_admitted and task_result lines, additive to the loop's own events
        before_task=before_task,
        agent=AgentTurns(
            lambda: engine.backend,
            engine.loaded.manifest.agent.env,
            iteration,
            # what the loop's own turns go without (the engine's credentials) its agent tasks go without
            withheld=frozenset(env) - frozenset(engine.agent_env),
        ),
        caps=engine.caps,
        task_runners=engine.task_runners,  # a task needing what this machine lacks: [deploy]'s cluster
    )
    report = PlanExecutor(graph.plan, graph.kinds, engine.log, config).run()
    run.spent += report.spent_usd  # engine operations report none: their spend is already counted
    if operations.error is not None:
        raise operations.error
    unsettled = _not_passed(graph, report)
    for name, status, note in unsettled:
        engine.note(f"iteration {iteration}: task {name!r} {status}{f': {note}' if note else ''}")
    if operations.exit is None and len(run.rows) == rows_before and not _agent_unreachable(graph, report):
        why = next(
            (f"task {name!r} {status}{f': {note}' if note else ''}" for name, status, note in unsettled),
            report.reason,
        )
        reject(engine, run, iteration, f"the workflow reached no decision: {why}", operations.turn)
    return operations.exit


def _not_passed(graph: AuthoredGraph, report: PlanReport) -> list[tuple[str, str, str]]:
    """Non-engine tasks that did not pass, in plan order (engine steps speak through rows)."""
    found: list[tuple[str, str, str]] = []
    for name in graph.plan.order:
        result = report.results.get(name)
        if result is None or result.status in (TaskStatus.PASS.value, TaskStatus.SKIPPED.value):
            continue
        if graph.kinds.entries[result.task_kind].value.engine:
            continue
        found.append((name, result.status, result.note))
    return found


def _agent_unreachable(graph: AuthoredGraph, report: PlanReport) -> bool:
    """The candidate turn was a transport failure: the loop retries it without spending the iteration."""
    results: dict[str, Any] = report.results
    return any(
        task.kind == "engine_propose"
        and name in results
        and results[name].status == TaskStatus.TRANSPORT.value
        for name, task in graph.plan.by_name().items()
    )
