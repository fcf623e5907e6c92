"""The flow model: a small, renderer-neutral picture of one run (the `.json` rendering is this, as data)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.flow.figures import improvement_pct as improvement_pct
from crucible_core.flow.figures import versus_baseline as versus_baseline

FLOW_MODEL_VERSION = 1


@value_methods
@attrs.define(repr=False, eq=False)
class ToolCall:
    name: str
    summary: str = ""


@value_methods
@attrs.define(repr=False, eq=False)
class Rung:
    """One step of the check/measure ladder for an iteration (a graded evidence task or a measure-DAG job)."""

    name: str
    status: str  # passed | failed | skipped, or a task status (pass/fail/transport/...)
    note: str = ""
    secs: float | None = None


@value_methods
@attrs.define(repr=False, eq=False)
class Candidate:
    """One measured candidate: the iteration's row, or one of a wide round's side-by-side rows."""

    decision: str
    score: float | None = None
    note: str = ""
    detail: str = ""
    diffstat: str = ""
    diff: str = ""  # the unified diff as the row holds it (bounded and redacted when written)
    kept_snap: str | None = None
    solved: bool = False


@value_methods
@attrs.define(repr=False, eq=False)
class PlanTask:
    name: str
    kind: str = ""
    depends_on: list[str] = attrs.Factory(list)
    required: bool = False
    stage: str = ""
    status: str = "pending"
    note: str = ""
    attempts: int = 0
    cost_usd: float = 0.0
    plan_version: int = 0
    secs: float = 0.0  # how long its attempts ran
    output: str = ""  # its JSON output as compact text, bounded (the log holds it redacted)


@value_methods
@attrs.define(repr=False, eq=False)
class Iteration:
    """One iteration's column; iteration 0 is the wide round before the deep loop, when there is one."""

    iter: int
    decision: str = "pending"  # keep | discard | invalid | error | pending (no row: died mid-turn)
    score: float | None = None
    best: float | None = None  # best score after this iteration's decision
    note: str = ""
    detail: str = ""
    diffstat: str = ""
    diff: str = ""
    wide: bool = False
    candidates: list[Candidate] = attrs.Factory(list)
    tools: list[ToolCall] = attrs.Factory(list)
    text_events: int = 0
    final_text: str = ""
    agent_turns: int = 0
    agent_cost: float = 0.0
    agent_error: str = ""
    ladder: list[Rung] = attrs.Factory(list)
    resumed_before: bool = False
    wall_secs: float | None = None  # from --spans
    plan: list[PlanTask] = attrs.Factory(list)  # this iteration's own graph (a scored workflow)


@value_methods
@attrs.define(repr=False, eq=False)
class Resume:
    """A resume boundary: the run was restarted from its log before `before_iter`."""

    before_iter: int
    recovery: str = ""
    detail: str = ""


@value_methods
@attrs.define(repr=False, eq=False)
class Header:
    kind: str = "loop"  # loop | playbook | plan (contract/run_kind.py)
    verdict: str | None = None  # a playbook's or a plan's: pass | fail, None until it ends
    goal: str = ""
    gate: str = ""
    model: str = ""
    direction: str = "higher"
    identity: str = ""
    outcome: str = "unfinished"
    reason: str = ""
    baseline: float | None = None
    best: float | None = None
    improvement_pct: float | None = None
    spent_usd: float = 0.0
    elapsed_secs: float = 0.0
    iterations_planned: int | None = None
    kept: int = 0
    discarded: int = 0
    invalid: int = 0
    escalation: str = ""


@value_methods
@attrs.define(repr=False, eq=False)
class FlowModel:
    header: Header = attrs.Factory(Header)
    iterations: list[Iteration] = attrs.Factory(list)
    plan: list[PlanTask] = attrs.Factory(list)
    resumes: list[Resume] = attrs.Factory(list)
    notes: list[str] = attrs.Factory(list)
    version: int = FLOW_MODEL_VERSION

    @property
    def is_task_run(self) -> bool:
        """A playbook or a plan file: its tasks are the run, there are no iterations to show."""
        return self.header.kind != "loop"

    @property
    def deep_iterations(self) -> list[Iteration]:
        """The iterations proper: not the wide round before iteration 1, which spends none."""
        return [it for it in self.iterations if it.iter > 0]

    def to_wire(self) -> dict[str, Any]:
        return attrs.asdict(self)


# A rendering of the model, as plugins register it (crucible_register_flow_renderers): a function
# from the model to the file's text.
FlowRenderer = Callable[[FlowModel], str]
