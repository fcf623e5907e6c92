"""The graph a wide round is: N isolated propose tasks, then one serial measure, then decide.

Compiled from `[search]` (round.py runs it on the plan executor: the proposals with one
worker per candidate, the ranking inline): each `propose-<slot>` runs in its own fork of the kept state (isolation
"worktree", lent by the World), so the proposals run at the same time; `measure` waits for
all of them and measures the candidates one after another in the main workspace, ranking them
by the policy; `decide` keeps the best when it beats the incumbent.

A proposal is a `wide_propose` task: the engine's propose operation, which a task runner may
carry out elsewhere when `[search].needs` names a capability this machine lacks (the agent's
turn command runs there and the fork comes back edited). The kind exists only in the wide
round's own registry (`wide_kinds`), so an authored graph cannot name it.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from crucible_core.api import Attempt, EngineFields, Outcome, Registry, TaskContext, TaskKindSpec, ir

PROPOSE_PREFIX = "propose-"
WIDE_PROPOSE_KIND = "wide_propose"
# A proposal run elsewhere may lose its machine (an evicted pod): it is tried again this many
# times. Only transport failures are retried; a turn that ran and failed is a candidate.
REMOTE_PROPOSE_RETRIES = 2


def _run_wide_propose(context: TaskContext) -> Attempt:
    if context.engine is None:  # validation admits engine kinds only with an engine
        return Attempt(Outcome.TRANSPORT, note="no engine to propose", transport="other")
    return context.engine.run_operation("propose", context)


WIDE_PROPOSE = TaskKindSpec(
    WIDE_PROPOSE_KIND,
    EngineFields,
    _run_wide_propose,
    exclusive=True,
    may_emit=False,
    engine=True,
    allows_settled_join=False,
    describe="one wide-round candidate's agent turn, in its own fork",
    remote=True,  # with a task runner's shell, the turn's command runs there
    returns_workspace=True,  # and the fork it edited comes back to be captured
)


def wide_kinds() -> Registry[TaskKindSpec]:
    """The core kinds plus `wide_propose`: what a wide round's graphs are validated and run with."""
    from crucible_core.api import core_kinds

    registry = core_kinds()
    registry.add(WIDE_PROPOSE_KIND, WIDE_PROPOSE, "crucible-plugin-search-wide")
    return registry


def propose_task(slot: int) -> str:
    return f"{PROPOSE_PREFIX}{slot}"


def slot_of(task: str) -> int | None:
    """The candidate slot a propose task stands for, or None for another task."""
    if not task.startswith(PROPOSE_PREFIX):
        return None
    digits = task[len(PROPOSE_PREFIX) :]
    return int(digits) if digits.isdigit() else None


def proposals_plan(slots: Iterable[int], needs: str | None = None) -> ir.Plan:
    """The fan-out: one isolated propose task per candidate slot still to propose.

    A resume leaves out the slots whose candidates are already recorded. A proposal never
    fails the graph (a failed turn is a candidate with nothing to measure). `needs` is
    `[search].needs`: a proposal needing it runs wherever the executor finds it provided.
    """
    tasks = tuple(
        ir.Task(
            name=propose_task(slot),
            kind=WIDE_PROPOSE_KIND,
            fields=EngineFields(op="propose"),
            isolation=ir.Isolation.WORKTREE,
            needs=needs or "any",
            retries=REMOTE_PROPOSE_RETRIES if needs else 0,
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


def wide_plan(slots: Iterable[int], needs: str | None = None) -> ir.Plan:
    """The whole round as one graph (what `measure` waits for): proposals -> measure -> decide.

    It runs as its two halves: `proposals_plan` on worker threads, one per candidate, and
    `ranking_plan` inline, so an operator abort reaches a running measure as in the deep loop.
    """
    proposals = proposals_plan(slots, needs).tasks
    measure, decide = ranking_plan().tasks
    measure = attrs.evolve(measure, depends_on=tuple(task.name for task in proposals))
    return ir.Plan(version=ir.PLAN_VERSION, budget=ir.Budget(0.0), tasks=(*proposals, measure, decide))


def admitted(plan: ir.Plan) -> ir.ValidPlan:
    from crucible_core.api import validate_plan

    return validate_plan(plan, wide_kinds(), owns_world_and_judge=True, source="the wide round")


def admitted_wide_plan(slots: Iterable[int], needs: str | None = None) -> ir.ValidPlan:
    return admitted(wide_plan(slots, needs))
