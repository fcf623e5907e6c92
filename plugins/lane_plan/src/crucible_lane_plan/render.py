"""Printing an admitted plan: canonical JSON or TOML, and Graphviz or Mermaid flowcharts."""

from __future__ import annotations

import enum
import json
from typing import Any

import attrs

from crucible_core.api import PlanAdmitted, ir, toml_value


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if attrs.has(type(value)):
        return {k: _plain(v) for k, v in attrs.asdict(value, recurse=False).items() if v is not None}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def task_table(task: ir.Task) -> dict[str, Any]:
    """The task as its author would write it, defaults left out."""
    table: dict[str, Any] = {"name": task.name}
    fields = _plain(task.fields)
    if task.kind.startswith("engine_"):
        table["kind"] = "engine"
    else:
        table["kind"] = task.kind
    table.update(fields)
    defaults = ir.Task(name="", kind="", fields=None)
    for key in (
        "depends_on",
        "join",
        "required",
        "needs",
        "isolation",
        "session",
        "emits",
        "emits_files",
        "stage",
        "retries",
        "timeout",
    ):
        value = getattr(task, key)
        if value != getattr(defaults, key):
            table[key] = _plain(value)
    return table


def to_json(plan: ir.ValidPlan, verdict: str, runs_on: dict[str, str] | None = None) -> str:
    """The admitted plan as JSON; `runs_on` (task -> task runner) appears when runners are configured."""
    admitted = PlanAdmitted.of(plan).fields()
    document = {
        **admitted,
        "order": list(plan.order),
        "verdict": verdict,
        "task_tables": [task_table(t) for t in plan.tasks],
    }
    if runs_on is not None:
        document["runs_on"] = runs_on
    return json.dumps(document, indent=2, sort_keys=True)


def to_toml(plan: ir.ValidPlan) -> str:
    lines = [f"version = {plan.plan.version}"]
    if plan.plan.reason:
        lines.append(f"reason = {toml_value(plan.plan.reason)}")
    lines += ["", "[budget]", f"usd = {plan.plan.budget.usd!r}"]
    for task in plan.tasks:
        lines += ["", "[[task]]"]
        lines += [f"{key} = {toml_value(value)}" for key, value in task_table(task).items()]
    return "\n".join(lines) + "\n"


def _label(task: ir.Task) -> str:
    extras = [task.kind]
    if not task.required:
        extras.append("advisory")
    if task.isolation is ir.Isolation.WORKTREE:
        extras.append("isolated")
    if task.join is not ir.Join.ALL:
        extras.append(f"join {task.join.value}")
    return f"{task.name}\\n({', '.join(extras)})"


def to_dot(plan: ir.ValidPlan) -> str:
    lines = ["digraph plan {", "  rankdir=LR;", '  node [shape=box, style=rounded, fontname="sans"];']
    for task in plan.tasks:
        style = ', style="rounded,dashed"' if not task.required or task.stage is ir.Stage.EPILOGUE else ""
        lines.append(f'  "{task.name}" [label="{_label(task)}"{style}];')
    for task in plan.tasks:
        for dep in task.depends_on:
            lines.append(f'  "{dep}" -> "{task.name}";')
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_mermaid(plan: ir.ValidPlan) -> str:
    ids = {task.name: f"t{i}" for i, task in enumerate(plan.tasks)}
    lines = ["flowchart LR"]
    for task in plan.tasks:
        label = _label(task).replace("\\n", "<br/>").replace('"', "'")
        lines.append(f'    {ids[task.name]}["{label}"]')
    for task in plan.tasks:
        for dep in task.depends_on:
            lines.append(f"    {ids[dep]} --> {ids[task.name]}")
    return "\n".join(lines) + "\n"


def default_iteration_plan() -> ir.Plan:
    """The graph one autoresearch iteration runs (core's, where the loop takes it too)."""
    from crucible_core.api import iteration_plan

    return iteration_plan()
