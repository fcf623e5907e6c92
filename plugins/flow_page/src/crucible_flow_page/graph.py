"""The flow model as a graph: Graphviz DOT and Mermaid flowchart text.

A loop is its chain of iterations from the baseline to the outcome (and a run-level plan beside
it); a playbook or a plan file is its task graph alone, coloured by status, the verdict and the
outcome in the graph's label.
"""

from __future__ import annotations

from crucible_core.api import FlowModel, Iteration, PlanTask, verdict_word

_DOT_FILL = {"keep": "#d1f0d8", "discard": "#eaeef2", "invalid": "#ffd8d3", "error": "#ffd8d3"}
_TASK_FILL = {"pass": "#d1f0d8", "fail": "#ffd8d3", "transport": "#ffd8d3", "blocked": "#ffd8d3"}
_TASK_CLASS = {"pass": "keep", "fail": "invalid", "transport": "invalid", "blocked": "invalid"}


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def _label(it: Iteration) -> str:
    head = f"#{it.iter} {it.decision} {_num(it.score)}"
    if it.wide:
        head += f" (wide x{len(it.candidates)})"
    tools = f"{len(it.tools)} tool calls" if it.tools else "no tool calls"
    return f"{head}\n{tools}\n{it.note[:60]}".rstrip()


def _dot_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _task_run_label(model: FlowModel) -> str:
    h = model.header
    return f"{h.kind} {verdict_word(h.kind, h.verdict)}; outcome {h.outcome}"


def _dot_tasks(tasks: list[PlanTask], indent: str) -> list[str]:
    lines = []
    names = {t.name: f"task{n}" for n, t in enumerate(tasks)}
    for task in tasks:
        fill = _TASK_FILL.get(task.status, "#fff8c5")
        label = _dot_str(f"{task.name}\n{task.kind} {task.status}")
        lines.append(f'{indent}{names[task.name]} [label={label}, fillcolor="{fill}"];')
        for dep in task.depends_on:
            if dep in names:
                lines.append(f"{indent}{names[dep]} -> {names[task.name]};")
    return lines


def render_dot(model: FlowModel) -> str:
    h = model.header
    lines = [
        "digraph crucible_flow {",
        "  rankdir=LR;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fillcolor="#ffffff"];',
    ]
    if model.is_task_run:
        lines.append(f"  label={_dot_str(_task_run_label(model))};\n  labelloc=t;")
        return "\n".join([*lines, *_dot_tasks(model.plan, "  "), "}"]) + "\n"
    lines.append(f'  baseline [label={_dot_str("baseline " + _num(h.baseline))}, fillcolor="#ddf4ff"];')
    previous = "baseline"
    resumed = {r.before_iter for r in model.resumes}
    for it in model.iterations:
        node = f"iter{it.iter}"
        fill = _DOT_FILL.get(it.decision, "#fff8c5")
        lines.append(f'  {node} [label={_dot_str(_label(it))}, fillcolor="{fill}"];')
        style = ' [style=dashed, label="resume"]' if it.iter in resumed else ""
        lines.append(f"  {previous} -> {node}{style};")
        previous = node
    outcome = f"{h.outcome} best {_num(h.best)}"
    lines.append(f'  outcome [label={_dot_str(outcome)}, shape=oval, fillcolor="#ddf4ff"];')
    lines.append(f"  {previous} -> outcome;")
    if model.plan:
        lines.append('  subgraph cluster_plan {\n    label="plan";')
        lines += _dot_tasks(model.plan, "    ")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _mmd_str(text: str) -> str:
    # Mermaid labels take entity codes; brackets and quotes would end the label early.
    out = (
        text.replace("#", "#35;")
        .replace("&", "#amp;")
        .replace('"', "#quot;")
        .replace("<", "#lt;")
        .replace(">", "#gt;")
    )
    return '"' + out.replace("\n", "<br/>") + '"'


def _mmd_tasks(tasks: list[PlanTask], indent: str) -> list[str]:
    lines = []
    names = {t.name: f"task{n}" for n, t in enumerate(tasks)}
    for task in tasks:
        lines.append(f"{indent}{names[task.name]}[{_mmd_str(f'{task.name} {task.kind} {task.status}')}]")
        lines.append(f"{indent}class {names[task.name]} {_TASK_CLASS.get(task.status, 'other')}")
        for dep in task.depends_on:
            if dep in names:
                lines.append(f"{indent}{names[dep]} --> {names[task.name]}")
    return lines


_MMD_CLASSES = [
    "  classDef keep fill:#d1f0d8",
    "  classDef discard fill:#eaeef2",
    "  classDef invalid fill:#ffd8d3",
    "  classDef error fill:#ffd8d3",
    "  classDef other fill:#fff8c5",
]


def render_mermaid(model: FlowModel) -> str:
    h = model.header
    if model.is_task_run:
        verdict = f"  outcome(({_mmd_str(_task_run_label(model))}))"  # beside the graph, on no edge
        return "\n".join(["flowchart LR", verdict, *_mmd_tasks(model.plan, "  "), *_MMD_CLASSES]) + "\n"
    lines = ["flowchart LR", f"  baseline({_mmd_str('baseline ' + _num(h.baseline))})"]
    previous = "baseline"
    resumed = {r.before_iter for r in model.resumes}
    for it in model.iterations:
        node = f"iter{it.iter}"
        lines.append(f"  {node}[{_mmd_str(_label(it))}]")
        lines.append(
            f"  {previous} -.->|resume| {node}" if it.iter in resumed else f"  {previous} --> {node}"
        )
        lines.append(f"  class {node} {it.decision if it.decision in _DOT_FILL else 'other'}")
        previous = node
    lines.append(f"  outcome(({_mmd_str(h.outcome + ' best ' + _num(h.best))}))")
    lines.append(f"  {previous} --> outcome")
    if model.plan:
        lines.append("  subgraph plan")
        lines += _mmd_tasks(model.plan, "    ")
        lines.append("  end")
    return "\n".join(lines + _MMD_CLASSES) + "\n"
