"""A run's task graph as a small standalone SVG: one box per task, coloured by its status.

The flow page draws a playbook or a plan file with this instead of a score chart. Hand-written
for the reasons RESULTS.md's score chart gives (crucible_results_md.score_chart: no dependency,
inlinable, every label escaped here). The layout is layered: a task sits one column right of its
deepest dependency, tasks in a column keep the plan's order, and the epilogue (which depends on
nothing in the main graph, and runs after it) gets the last column.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from html import escape

from crucible_core.api import EPILOGUE, PlanTask, task_roles

STATUS_FILLS = {
    "pass": "#d1f0d8",
    "fail": "#ffd8d3",
    "transport": "#ffd8d3",
    "blocked": "#ffebe9",
    "truncated": "#fff8c5",
    "skipped": "#eaeef2",
}
_PENDING_FILL = "#ffffff"  # not settled: live, or died before it settled
_STROKES = {"fail": "#cf222e", "transport": "#cf222e", "blocked": "#cf222e", "pass": "#1a7f37"}
NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 152, 46, 36, 14, 12
NAME_CHARS = 20


def columns(tasks: Sequence[PlanTask]) -> list[int]:
    """Each task's column: one past its deepest dependency's (0 for a root), the epilogue's last.

    Walked in dependency order (Kahn), so a long chain needs no recursion; a task on a cycle
    (only a damaged log can hold one) stays in column 0.
    """
    index = {task.name: n for n, task in enumerate(tasks)}
    deps = [
        sorted({index[d] for d in task.depends_on if d in index and index[d] != n})
        for n, task in enumerate(tasks)
    ]
    waiting = [len(d) for d in deps]
    children: list[list[int]] = [[] for _ in tasks]
    for n, ds in enumerate(deps):
        for d in ds:
            children[d].append(n)
    column = [0] * len(tasks)
    ready = deque(n for n, count in enumerate(waiting) if count == 0)
    while ready:
        n = ready.popleft()
        column[n] = 1 + max((column[d] for d in deps[n]), default=-1)
        for child in children[n]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    last = 1 + max((c for c, task in zip(column, tasks, strict=True) if task.stage != EPILOGUE), default=-1)
    return [last if task.stage == EPILOGUE else c for c, task in zip(column, tasks, strict=True)]


def _short(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def render_task_graph(tasks: Sequence[PlanTask], *, title: str = "task graph") -> str:
    """An SVG document: a box per task (class `node st-<status>`, `data-task` its index), an arrow
    per dependency. Each box carries the task's name, status and time; its tooltip the note."""
    cols = columns(tasks)
    rows: list[int] = []
    filled: dict[int, int] = {}
    for col in cols:
        rows.append(filled.get(col, 0))
        filled[col] = rows[-1] + 1
    width = PAD * 2 + (max(cols, default=0) + 1) * (NODE_W + GAP_X) - GAP_X
    height = PAD * 2 + 18 + max(filled.values(), default=1) * (NODE_H + GAP_Y) - GAP_Y

    def x(n: int) -> int:
        return PAD + cols[n] * (NODE_W + GAP_X)

    def y(n: int) -> int:
        return PAD + 18 + rows[n] * (NODE_H + GAP_Y)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="task-graph" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#8c959f"/></marker></defs>',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{PAD}" y="{PAD + 4}" font-family="sans-serif" font-size="12" fill="#24292f">'
        f"{escape(title)}</text>",
    ]
    epilogue = [x(n) for n, task in enumerate(tasks) if task.stage == EPILOGUE]
    if epilogue:  # the epilogue runs after the graph settles, whatever became of it
        edge = min(epilogue) - GAP_X / 2
        parts.append(
            f'<line class="epilogue" x1="{edge}" y1="{PAD + 12}" x2="{edge}" y2="{height - PAD}" '
            f'stroke="#d0d7de" stroke-dasharray="4,4"/><text x="{edge + 6}" y="{PAD + 4}" '
            'font-family="sans-serif" font-size="11" fill="#57606a">epilogue</text>'
        )
    index = {task.name: n for n, task in enumerate(tasks)}
    for n, task in enumerate(tasks):
        for dep in task.depends_on:
            d = index.get(dep)
            if d is None:
                continue
            x1, y1, x2, y2 = x(d) + NODE_W, y(d) + NODE_H / 2, x(n), y(n) + NODE_H / 2
            mid = (x1 + x2) / 2
            parts.append(
                f'<path class="edge" d="M{x1},{y1:.1f}C{mid:.1f},{y1:.1f} {mid:.1f},{y2:.1f} {x2},{y2:.1f}" '
                'fill="none" stroke="#8c959f" stroke-width="1.2" marker-end="url(#arrow)"/>'
            )
    for n, task in enumerate(tasks):
        fill = STATUS_FILLS.get(task.status, _PENDING_FILL)
        stroke = _STROKES.get(task.status, "#8c959f")
        dashed = ' stroke-dasharray="4,3"' if task.status not in STATUS_FILLS else ""
        tags = [task.status, *task_roles(task)]
        secs = f" · {task.secs:.2f}s" if task.attempts else ""
        tooltip = f"{task.name}: {', '.join(tags)}" + (f"\n{task.note}" if task.note else "")
        parts.append(
            f'<g class="node st-{escape(task.status, quote=True)}" data-task="{n}" tabindex="0" role="button" '
            f'aria-label="{escape(task.name, quote=True)}"><title>{escape(tooltip)}</title>'
            f'<rect x="{x(n)}" y="{y(n)}" width="{NODE_W}" height="{NODE_H}" rx="6" fill="{fill}" '
            f'stroke="{stroke}"{dashed}/>'
            f'<text x="{x(n) + 8}" y="{y(n) + 18}" font-family="sans-serif" font-size="12" font-weight="600" '
            f'fill="#1f2328">{escape(_short(task.name, NAME_CHARS))}</text>'
            f'<text x="{x(n) + 8}" y="{y(n) + 36}" font-family="sans-serif" font-size="11" fill="#57606a">'
            f"{escape(_short(' '.join(tags[:2]) + secs, NAME_CHARS + 6))}</text></g>"
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
