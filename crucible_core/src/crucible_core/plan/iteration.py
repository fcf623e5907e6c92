"""The graph one autoresearch iteration is: propose -> apply -> measure -> decide, defined once.

The loop runs it on the plan executor every iteration, and `crucible plan show --manifest`
prints it, so what is shown is what runs.
"""

from __future__ import annotations

import functools

from crucible_core.plan import ir
from crucible_core.plan.builtin_kinds import EngineFields, register_core_kinds
from crucible_core.plan.kinds import TaskKindSpec
from crucible_core.registry import Registry

ITERATION_CHAIN = ("propose", "apply", "measure", "decide")


def iteration_plan() -> ir.Plan:
    """Each step an engine operation, each required, none retried by the executor.

    A transport failure of the agent is the loop shell's to retry (it does not spend the
    iteration), so the graph never reruns a step. The graph's budget is 0: engine operations
    report no spend to the executor, because the loop shell's budget (iterations, USD, time)
    accounts every turn and is checked at each iteration head.
    """
    tasks = []
    for i, op in enumerate(ITERATION_CHAIN):
        tasks.append(
            ir.Task(
                name=op,
                kind=f"engine_{op}",
                fields=EngineFields(op=op, source="measure" if op == "decide" else None),
                depends_on=(ITERATION_CHAIN[i - 1],) if i else (),
                retries=0,
            )
        )
    return ir.Plan(version=ir.PLAN_VERSION, budget=ir.Budget(0.0), tasks=tuple(tasks))


@functools.cache
def admitted_iteration_plan() -> ir.ValidPlan:
    """The iteration graph validated once per process against the core's kinds."""
    from crucible_core.plan.validate import validate

    return validate(iteration_plan(), core_kinds(), owns_world_and_judge=True, source="the iteration graph")


@functools.cache
def core_kinds() -> Registry[TaskKindSpec]:
    """The registry of the core's own task kinds (the engine operations among them)."""
    registry: Registry[TaskKindSpec] = Registry("task kind")
    register_core_kinds(lambda name, spec: registry.add(name, spec, "crucible-core"))
    return registry
