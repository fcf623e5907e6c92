"""Admission: every structural rule a plan must meet before it may spend anything.

All problems are collected and reported together. The result is a ValidPlan carrying the
declaration-stable dependency order the executor dispatches in.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Collection

from crucible_core.plan import ir
from crucible_core.plan.errors import PlanError
from crucible_core.plan.kinds import TaskKindSpec
from crucible_core.registry import Registry

FIELD_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")
SESSION_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
RESERVED_INPUTS = frozenset({"outcome", "kept"})
RESERVED_OUTPUT_FIELDS = frozenset({"complete", "reason"})


def validate(
    plan: ir.Plan,
    kinds: Registry[TaskKindSpec],
    *,
    owns_world_and_judge: bool = False,
    source: str = "plan",
) -> ir.ValidPlan:
    problems: list[str] = []
    by_name: dict[str, ir.Task] = {}
    if not plan.tasks:
        problems.append("the plan has no [[task]]")
    for task in plan.tasks:
        if not task.name.strip():
            problems.append("a task has an empty name")
        elif task.name in by_name:
            problems.append(f"task name {task.name!r} is used twice")
        else:
            by_name[task.name] = task
    for task in plan.tasks:
        _task_rules(task, by_name, kinds, owns_world_and_judge, problems)
    order, dependents = _order(plan.tasks, by_name, problems)
    if order is not None:
        _session_rules(plan.tasks, dependents, problems)
    if problems:
        raise PlanError(problems, source=source)
    assert order is not None
    return ir.ValidPlan(plan, tuple(order), {k: tuple(v) for k, v in dependents.items()})


def _task_rules(
    task: ir.Task,
    by_name: dict[str, ir.Task],
    kinds: Registry[TaskKindSpec],
    owns_world_and_judge: bool,
    problems: list[str],
) -> None:
    spec = kinds.entries[task.kind].value
    where = f"task {task.name!r}"
    if spec.engine and not owns_world_and_judge:
        problems.append(
            f"{where}: {task.kind} is an engine operation; it runs only inside a run that owns a "
            "World and a frozen Judge (`crucible run`), not in a standalone plan"
        )
    if spec.engine and task.stage is ir.Stage.EPILOGUE:
        problems.append(f"{where}: engine operations cannot be epilogue tasks")
    seen: set[str] = set()
    for dep in task.depends_on:
        if dep == task.name:
            problems.append(f"{where} depends on itself")
        elif dep in RESERVED_INPUTS:
            problems.append(f"{where}: {dep!r} is a reserved input name and cannot be a dependency")
        elif dep not in by_name:
            problems.append(f"{where} depends on unknown task {dep!r}")
        elif dep in seen:
            problems.append(f"{where} names dependency {dep!r} twice")
        else:
            upstream = by_name[dep]
            if upstream.stage is not task.stage:
                problems.append(
                    f"{where} ({task.stage.value}) depends on {dep!r} ({upstream.stage.value}): "
                    "dependencies cannot cross stages; an epilogue task receives the main graph's "
                    "outcome as its `outcome` input instead"
                )
            if task.required and not upstream.required and task.join is ir.Join.ALL:
                problems.append(
                    f'{where} is required but needs advisory task {dep!r} to pass (join = "all"): '
                    f'mark {dep!r} required, {task.name!r} advisory, or join = "passed"/"settled"'
                )
        seen.add(dep)
    if task.join is not ir.Join.ALL and not task.depends_on:
        problems.append(f"{where}: join = {task.join.value!r} needs at least one dependency")
    if task.join is ir.Join.SETTLED and not spec.allows_settled_join:
        problems.append(f'{where}: a {task.kind} task cannot join "settled"')
    if spec.needs_dependencies and not task.depends_on:
        problems.append(f"{where}: a {task.kind} task needs at least one dependency")
    if task.retries < 0 or task.retries > 10:
        problems.append(f"{where}: retries must be between 0 and 10")
    if not 0 < task.timeout <= ir.MAX_TIMEOUT_SECONDS:
        problems.append(f"{where}: timeout must be above 0 and at most {ir.MAX_TIMEOUT_SECONDS:.0f} seconds")
    if not task.needs.strip():
        problems.append(f'{where}: needs cannot be empty ("any" runs everywhere)')
    _kind_field_rules(task, spec, where, by_name, problems)
    _emit_rules(task, spec, where, by_name, kinds, problems)
    if task.session is not None:
        if not SESSION_NAME.match(task.session):
            problems.append(f"{where}: session {task.session!r} must be 1-64 of A-Z a-z 0-9 _ . -")
        if not spec.allows_session:
            problems.append(f"{where}: a {task.kind} task cannot bind a session (agent turns only)")
        if task.isolation is ir.Isolation.WORKTREE:
            problems.append(
                f"{where}: session {task.session!r} is serial state; a session task cannot be isolated"
            )
    for path in task.emits_files:
        problem = _emitted_path_problem(path)
        if problem:
            problems.append(f"{where}: emits_files {path!r} {problem}")


def _kind_field_rules(
    task: ir.Task, spec: TaskKindSpec, where: str, by_name: dict[str, ir.Task], problems: list[str]
) -> None:
    fields = task.fields
    if spec.field_problems is not None:
        problems.extend(f"{where}: {problem}" for problem in spec.field_problems(task, by_name))
    if task.kind.startswith("engine_"):
        for ref in (getattr(fields, "source", None), getattr(fields, "tiebreak", None)):
            if ref is not None and ref not in by_name:
                problems.append(f"{where}: source {ref!r} is not a task in this plan")


def _declares_score(task: ir.Task | None) -> bool:
    # An absent or empty emits declares nothing and is never checked.
    return task is None or not task.emits or "score" in task.emits


def _emit_rules(
    task: ir.Task,
    spec: TaskKindSpec,
    where: str,
    by_name: dict[str, ir.Task],
    kinds: Registry[TaskKindSpec],
    problems: list[str],
) -> None:
    if task.emits and not spec.may_emit:
        problems.append(f"{where}: a {task.kind} task's output is engine-defined; it cannot declare emits")
    if len(set(task.emits)) != len(task.emits):
        problems.append(f"{where}: emits names a field twice")
    for field in task.emits:
        if not FIELD_NAME.match(field):
            problems.append(f"{where}: emits field {field!r} must be 1-64 of A-Z a-z 0-9 _")
        elif field in RESERVED_OUTPUT_FIELDS:
            # Present only on the attempt that ends the run early, so declaring one would fail every other run.
            problems.append(
                f"{where}: {field!r} is reserved for early completion and cannot be declared in emits"
            )
    if spec.reads_score:
        for dep in task.depends_on:
            if not _declares_score(by_name.get(dep)):
                problems.append(f'{where} ranks {dep!r} by score, but {dep!r} declares emits without "score"')
    if (
        task.kind == "engine_grade"
        and task.fields.source
        and not _declares_score(by_name.get(task.fields.source))
    ):
        problems.append(f'{where}: grade source {task.fields.source!r} declares emits without "score"')


def _emitted_path_problem(path: str) -> str | None:
    if not path or path.startswith("/") or "\\" in path:
        return "must be a relative path"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "must not contain empty, '.' or '..' components"
    return None


def _order(
    tasks: Collection[ir.Task], by_name: dict[str, ir.Task], problems: list[str]
) -> tuple[list[str] | None, dict[str, list[str]]]:
    """Kahn's algorithm on declaration index, so ties dispatch in the order they were written."""
    index = {task.name: i for i, task in enumerate(tasks) if task.name in by_name}
    names = list(index)
    indegree = {name: 0 for name in names}
    dependents: dict[str, list[str]] = {name: [] for name in names}
    for name in names:
        for dep in by_name[name].depends_on:
            if dep in index and dep != name:
                indegree[name] += 1
                dependents[dep].append(name)
    ready = [index[n] for n in names if indegree[n] == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        name = names[heapq.heappop(ready)]
        order.append(name)
        for child in dependents[name]:
            indegree[child] -= 1
            if indegree[child] == 0:
                heapq.heappush(ready, index[child])
    if len(order) != len(names):
        stuck = [n for n in names if indegree[n] > 0]
        problems.append(
            f"the dependencies form a cycle through: {_cycle(stuck, by_name) or ', '.join(stuck)}"
        )
        return None, dependents
    return order, dependents


def _cycle(stuck: list[str], by_name: dict[str, ir.Task]) -> str:
    """One concrete cycle among the stuck tasks, written a -> b -> a."""
    stuck_set = set(stuck)
    start = stuck[0]
    path = [start]
    seen = {start: 0}
    node = start
    while True:
        nxt = next((d for d in by_name[node].depends_on if d in stuck_set), None)
        if nxt is None:
            return ""
        if nxt in seen:
            loop = [*path[seen[nxt] :], nxt]
            return " -> ".join(reversed(loop))
        seen[nxt] = len(path)
        path.append(nxt)
        node = nxt


def _session_rules(tasks: Collection[ir.Task], dependents: dict[str, list[str]], problems: list[str]) -> None:
    """Tasks sharing a session are one conversation: each pair needs a dependency path."""

    def reaches(src: str, dst: str) -> bool:
        stack, seen = [src], set()
        while stack:
            node = stack.pop()
            for child in dependents.get(node, ()):
                if child == dst:
                    return True
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        return False

    sessions: dict[str, list[str]] = {}
    for task in tasks:
        if task.session is not None:
            sessions.setdefault(task.session, []).append(task.name)
    by_name = {task.name: task for task in tasks}
    for session, members in sessions.items():
        needs = sorted({by_name[name].needs for name in members})
        if len(needs) > 1:  # one conversation, one set of reachable services and capabilities
            problems.append(
                f"tasks sharing session {session!r} declare different needs ({', '.join(needs)}); "
                "give every task of a session the same needs"
            )
        for i, left in enumerate(members):
            for right in members[i + 1 :]:
                if not reaches(left, right) and not reaches(right, left):
                    problems.append(
                        f"tasks {left!r} and {right!r} share session {session!r} but neither depends on "
                        "the other; a session is serial, so add a dependency path between them"
                    )
