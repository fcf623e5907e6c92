"""The plan's session-log records, with the contract's field names (RFC-0001:C-WIRE).

`plan_admitted` is written once before any dispatch; `task_result` once per settled task.
These records are shaped so the shared wire module can replace them field for field.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from crucible_core.contract import wire
from crucible_core.contract.records import value_methods
from crucible_core.contract.wire import STAGE_ITERATION
from crucible_core.plan import ir

PLAN_ADMITTED = "plan_admitted"
TASK_RESULT = "task_result"
RECOVERY = "recovery"
SHUTDOWN = "shutdown"
DIED_IN_PLAN_TASK = "died_in_plan_task"
CLEAN_EXIT = "clean_exit"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class PlanTaskWire:
    name: str
    kind: str
    depends_on: list[str]
    session: str
    needs: str
    required: bool
    join: str
    stage: str

    @classmethod
    def of(cls, task: ir.Task) -> PlanTaskWire:
        return cls(**_task_fields(task))


def _task_fields(task: ir.Task) -> dict[str, Any]:
    """One admitted task as the plan_admitted line carries it."""
    return {
        "name": task.name,
        "kind": task.kind,
        "depends_on": list(task.depends_on),
        "session": task.session or "",
        "needs": task.needs,
        "required": task.required,
        "join": task.join.value,
        # the contract's token for the per-iteration graph, which the IR calls "main"
        "stage": STAGE_ITERATION if task.stage is ir.Stage.MAIN else task.stage.value,
    }


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class PlanAdmitted:
    plan_version: int
    reason: str
    budget_usd: float | None  # None: no cap of the graph's own (a scored workflow's iteration)
    tasks: list[PlanTaskWire]

    @classmethod
    def of(cls, plan: ir.ValidPlan) -> PlanAdmitted:
        return cls(
            plan_version=plan.plan.version,
            reason=plan.plan.reason,
            budget_usd=plan.plan.budget.usd if math.isfinite(plan.plan.budget.usd) else None,
            tasks=[PlanTaskWire.of(task) for task in plan.tasks],
        )

    def fields(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def wire_of(cls, plan: ir.ValidPlan) -> wire.PlanAdmitted:
        """`of(plan).as_wire()` without the intermediate record (one object per task, not two)."""
        budget = plan.plan.budget.usd
        return wire.PlanAdmitted(
            plan_version=plan.plan.version,
            reason=plan.plan.reason,
            budget_usd=float(budget) if math.isfinite(budget) else None,
            tasks=[wire.PlanTaskWire(**_task_fields(task)) for task in plan.tasks],
        )

    def as_wire(self) -> wire.PlanAdmitted:
        """The record as the wire's event, built directly: decoding `fields()` through the wire's
        converter gave the same event and cost about a third of writing the line in a 1,000-task
        plan (a test pins the two to each other)."""
        return wire.PlanAdmitted(
            plan_version=self.plan_version,
            reason=self.reason,
            budget_usd=None if self.budget_usd is None else float(self.budget_usd),
            tasks=[
                wire.PlanTaskWire(
                    name=task.name,
                    kind=task.kind,
                    depends_on=list(task.depends_on),
                    session=task.session,
                    needs=task.needs,
                    required=task.required,
                    join=task.join,
                    stage=task.stage,
                )
                for task in self.tasks
            ],
        )


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class BlockedWire:
    reason: str
    task: str | None = None


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class TaskResult:
    task: str
    status: str
    plan_version: int = ir.PLAN_VERSION
    task_kind: str = ""
    iter: int = 0
    attempts: int = 0
    cost_usd: float = 0.0
    metric: float | None = None
    output: dict[str, Any] | None = None
    note: str = ""
    secs: float = 0.0
    blocked: BlockedWire | None = None
    transport: str | None = None

    def fields(self) -> dict[str, Any]:
        # Optional fields stay off the wire when absent, as the contract's writers do.
        data = attrs.asdict(self)
        for key in ("metric", "output", "blocked", "transport"):
            if data[key] is None:
                del data[key]
        if "blocked" in data and data["blocked"]["task"] is None:
            del data["blocked"]["task"]  # present only when a required task's failure is the reason
        return data

    def as_wire(self) -> wire.TaskResult:
        """The record as the wire's event, built directly: decoding `fields()` through the wire's
        converter gave the same event and was most of what writing a task's line cost in a large
        plan (a test pins the two to each other)."""
        blocked = self.blocked
        return wire.TaskResult(
            task=self.task,
            status=self.status,
            plan_version=self.plan_version,
            task_kind=self.task_kind,
            iter=self.iter,
            attempts=self.attempts,
            cost_usd=float(self.cost_usd),
            metric=None if self.metric is None else float(self.metric),
            output=self.output,
            note=self.note,
            secs=float(self.secs),
            blocked=None
            if blocked is None
            else {"reason": blocked.reason}
            if blocked.task is None
            else {"reason": blocked.reason, "task": blocked.task},
            transport=self.transport,
        )

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> TaskResult:
        blocked = event.get("blocked")
        return cls(
            task=str(event.get("task", "")),
            status=str(event.get("status", "")),
            plan_version=int(event.get("plan_version", ir.PLAN_VERSION) or 0),
            task_kind=str(event.get("task_kind", "")),
            iter=int(event.get("iter", 0) or 0),
            attempts=int(event.get("attempts", 0) or 0),
            cost_usd=float(event.get("cost_usd", 0.0) or 0.0),
            metric=event.get("metric"),
            output=event.get("output") if isinstance(event.get("output"), dict) else None,
            note=str(event.get("note", "")),
            secs=float(event.get("secs", 0.0) or 0.0),
            blocked=BlockedWire(str(blocked.get("reason", "")), blocked.get("task"))
            if isinstance(blocked, dict)
            else None,
            transport=event.get("transport"),
        )
