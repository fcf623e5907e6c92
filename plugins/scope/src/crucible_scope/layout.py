"""Placing an admitted graph on a page: layers by longest path, left to right, no graphviz needed.

A pure function of the plan: each task's column is the length of the longest dependency chain
that reaches it, its row is its place among its column's tasks in the plan's own order. The
measurement steps (measure and grade operations) are boxed together as "Measurement", as the
spec's renderer groups them; the edges are drawn as they are.
"""

from __future__ import annotations

import attrs

from crucible_core.api import ir

NODE_W = 200
NODE_H = 52
GAP_X = 70
GAP_Y = 28
MARGIN = 36
TITLE_H = 34
MAX_LABEL = 26  # characters of a name or kind drawn in a box (longer ones end in "...")
MAX_TITLE = 90  # characters of the picture's title
MEASUREMENT_OPS = frozenset({"measure", "grade", "evaluate"})


@attrs.frozen
class Node:
    name: str
    kind: str
    layer: int
    row: int
    x: int
    y: int
    dashed: bool  # advisory, or an epilogue: not on the path to the verdict
    measurement: bool


@attrs.frozen
class Group:
    label: str
    x: int
    y: int
    w: int
    h: int


@attrs.frozen
class Layout:
    width: int
    height: int
    nodes: tuple[Node, ...]
    edges: tuple[tuple[str, str], ...]  # (from, to) by task name
    groups: tuple[Group, ...]

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)


def short(text: str, limit: int = MAX_LABEL) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _op(task: ir.Task) -> str:
    """The engine operation a task performs ("" for a task of another kind)."""
    op = getattr(task.fields, "op", None)
    if isinstance(op, str):
        return op
    return task.kind.removeprefix("engine_") if task.kind.startswith("engine_") else ""


def layers(tasks: list[ir.Task], order: list[str]) -> dict[str, int]:
    """Each task's longest-path depth from a task with no dependencies (the plan is acyclic)."""
    by_name = {t.name: t for t in tasks}
    depth: dict[str, int] = {}
    for name in order:  # a validated plan's order is topological
        deps = [d for d in by_name[name].depends_on if d in by_name]
        depth[name] = 1 + max((depth[d] for d in deps), default=-1)
    return depth


def lay_out(plan: ir.ValidPlan) -> Layout:
    """The page for an admitted plan, its tasks placed in its own (topological) order."""
    tasks = list(plan.tasks)
    order = [n for n in plan.order if any(t.name == n for t in tasks)]
    order += [t.name for t in tasks if t.name not in order]
    depth = layers(tasks, order)
    by_name = {t.name: t for t in tasks}
    columns: dict[int, list[str]] = {}
    for name in order:
        columns.setdefault(depth[name], []).append(name)
    rows = max((len(c) for c in columns.values()), default=1)
    nodes = []
    for layer, names in sorted(columns.items()):
        offset = (rows - len(names)) * (NODE_H + GAP_Y) // 2  # centre a short column
        for row, name in enumerate(names):
            task = by_name[name]
            nodes.append(
                Node(
                    name=name,
                    kind=task.kind,
                    layer=layer,
                    row=row,
                    x=MARGIN + layer * (NODE_W + GAP_X),
                    y=MARGIN + TITLE_H + offset + row * (NODE_H + GAP_Y),
                    dashed=not task.required or task.stage is ir.Stage.EPILOGUE,
                    measurement=_op(task) in MEASUREMENT_OPS,
                )
            )
    edges = tuple((dep, t.name) for t in tasks for dep in t.depends_on if dep in by_name)
    measured = [n for n in nodes if n.measurement]
    groups: tuple[Group, ...] = ()
    if measured:
        pad = 12
        left = min(n.x for n in measured) - pad
        top = min(n.y for n in measured) - pad - 16
        right = max(n.x for n in measured) + NODE_W + pad
        bottom = max(n.y for n in measured) + NODE_H + pad
        groups = (Group("Measurement", left, top, right - left, bottom - top),)
    count = max(depth.values(), default=0) + 1
    width = 2 * MARGIN + count * NODE_W + (count - 1) * GAP_X
    height = 2 * MARGIN + TITLE_H + rows * NODE_H + (rows - 1) * GAP_Y
    return Layout(width, height, tuple(nodes), edges, groups)
