"""The plan IR: a versioned graph of tasks, as admitted after loading and validation (attrs, frozen)."""

from __future__ import annotations

import enum
from typing import Any

import attrs

from crucible_core.contract.records import value_methods

PLAN_VERSION = 1
DEFAULT_RETRIES = 2  # transport-class failures only; a measured failure never reruns
DEFAULT_TIMEOUT_SECONDS = 1800.0
MAX_TIMEOUT_SECONDS = 86_400.0


class Join(enum.StrEnum):
    """How a task waits on its dependencies and what it receives from them."""

    ALL = "all"  # every dependency must pass
    PASSED = "passed"  # wait for all, fold the non-empty passing set
    SETTLED = "settled"  # wait for all, receive one status envelope per dependency


class Isolation(enum.StrEnum):
    SHARED = "shared"  # the one workspace every non-isolated task sees
    WORKTREE = "worktree"  # a disposable copy; edits are discarded, declared outputs leave


class Stage(enum.StrEnum):
    MAIN = "main"
    EPILOGUE = "epilogue"  # runs once after the main graph settles; never changes the verdict


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Budget:
    usd: float


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Task:
    """One unit of work. `fields` holds the kind's own settings (a frozen attrs instance)."""

    name: str
    kind: str  # the wire label: "command", "top_k", "engine_propose", ...
    fields: Any
    depends_on: tuple[str, ...] = ()
    join: Join = Join.ALL
    required: bool = True
    needs: str = "any"
    isolation: Isolation = Isolation.SHARED
    session: str | None = None
    emits: tuple[str, ...] = ()
    emits_files: tuple[str, ...] = ()
    stage: Stage = Stage.MAIN
    retries: int = DEFAULT_RETRIES
    timeout: float = DEFAULT_TIMEOUT_SECONDS


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Plan:
    version: int
    budget: Budget
    tasks: tuple[Task, ...]
    reason: str = ""

    def task(self, name: str) -> Task:
        for task in self.tasks:
            if task.name == name:
                return task
        raise KeyError(name)


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ValidPlan:
    """A plan that passed validation, with its declaration-stable dependency order.

    The executor accepts only this type, so an unvalidated plan cannot spend anything.
    """

    plan: Plan
    order: tuple[str, ...]  # dependency-first, ties in declaration order
    dependents: dict[str, tuple[str, ...]] = attrs.field(eq=False)

    @property
    def tasks(self) -> tuple[Task, ...]:
        return self.plan.tasks

    def by_name(self) -> dict[str, Task]:
        return {task.name: task for task in self.plan.tasks}

    def stage(self, stage: Stage) -> list[Task]:
        return [task for task in self.plan.tasks if task.stage is stage]
