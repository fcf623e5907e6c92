"""The graph a wide round is: N isolated propose tasks, then one serial measure, then decide.

Compiled from `[search]` (run/wide.py runs it on the plan executor: the proposals with one
worker per candidate, the ranking inline): each `propose-<slot>` runs in its own fork of the kept state (isolation
"worktree", lent by the World), so the proposals run at the same time; `measure` waits for
all of them and measures the candidates one after another in the main workspace, ranking them
by the policy; `decide` keeps the best when it beats the incumbent.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from crucible_core.plan import ir
from crucible_core.plan.builtin_kinds import EngineFields

PROPOSE_PREFIX = "propose-"


def propose_task(slot: int) -> str:
    return f"{PROPOSE_PREFIX}{slot}"


def slot_of(task: str) -> int | None:
    """The candidate slot a propose task stands for, or None for another task."""
    if not task.startswith(PROPOSE_PREFIX):
        return None
    digits = task[len(PROPOSE_PREFIX) :]
    return int(digits) if digits.isdigit() else None


def proposals_plan(slots: Iterable[int]) -> ir.Plan:
    """The fan-out: one isolated propose task per candidate slot still to propose.

    A resume leaves out the slots whose candidates are already recorded. A proposal never
    fails the graph (a failed turn is a candidate with nothing to measure).
    """
    tasks = tuple(
        ir.Task(
            name=propose_task(slot),
            kind="engine_propose",
            fields=EngineFields(op="propose"),
            isolation=ir.Isolation.WORKTREE,
            retries=0,
            timeout=ir.MAX_TIMEOUT_SECONDS,  # the turn's own deadline ([agent].turn_timeout) governs
        )
        for slot in slots
    )
    return ir.Plan(version=ir.PLAN_VERSION, budget=ir.Budget(0.0), tasks=tasks)


def ranking_plan() -> ir.Plan:
    """The fan-in, on the loop's own thread: measure every candidate serially, then decide."""
    measure = ir.Task(
        name="measure",
        kind="engine_measure",
        fields=EngineFields(op="measure"),
        retries=0,
        timeout=ir.MAX_TIMEOUT_SECONDS,
    )
    decide = ir.Task(
        name="decide",
        kind="engine_decide",
        fields=EngineFields(op="decide", source="measure"),
        depends_on=("measure",),
        retries=0,
    )
    return ir.Plan(version=ir.PLAN_VERSION, budget=ir.Budget(0.0), tasks=(measure, decide))


def wide_plan(slots: Iterable[int]) -> ir.Plan:
    """The whole round as one graph (what `measure` waits for): proposals -> measure -> decide.

    It runs as its two halves: `proposals_plan` on worker threads, one per candidate, and
    `ranking_plan` inline, so an operator abort reaches a running measure as in the deep loop.
    """
    proposals = proposals_plan(slots).tasks
    measure, decide = ranking_plan().tasks
    measure = attrs.evolve(measure, depends_on=tuple(task.name for task in proposals))
    return ir.Plan(version=ir.PLAN_VERSION, budget=ir.Budget(0.0), tasks=(*proposals, measure, decide))


def admitted(plan: ir.Plan) -> ir.ValidPlan:
    from crucible_core.plan.iteration import core_kinds
    from crucible_core.plan.validate import validate

    return validate(plan, core_kinds(), owns_world_and_judge=True, source="the wide round")


def admitted_wide_plan(slots: Iterable[int]) -> ir.ValidPlan:
    return admitted(wide_plan(slots))
