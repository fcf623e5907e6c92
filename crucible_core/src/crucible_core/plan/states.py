"""The executor's state machines as data: task states, plan states, and every allowed edge.

The executor asks `TASK_MACHINE.step` / `PLAN_MACHINE.step` at every decision, so a
transition missing from these tables is one it cannot take; `crucible plan states` renders
the same tables, so the documentation is generated from what the code walks.
"""

from __future__ import annotations

import enum

import attrs

from crucible_core.contract.records import value_methods


class TaskStatus(enum.StrEnum):
    """The six statuses a task settles on (the task_result event's `status`)."""

    PASS = "pass"
    FAIL = "fail"
    TRANSPORT = "transport"  # every attempt died on transport; retries exhausted
    SKIPPED = "skipped"  # declared by the task, or unrunnable advisory work
    BLOCKED = "blocked"  # never dispatched: see BlockReason
    TRUNCATED = "truncated"  # the plan could never produce an honest verdict here


class BlockReason(enum.StrEnum):
    """Why a task settled blocked (the task_result event's `blocked.reason`)."""

    REQUIRED_TASK_FAILED = "required_task_failed"
    BUDGET_CEILING = "budget_ceiling"
    WALL_CLOCK_CEILING = "wall_clock_ceiling"
    DEPENDENCY_DID_NOT_PASS = "dependency_did_not_pass"
    STAGING_REFUSED = "staging_refused"


BLOCK_NOTES: dict[BlockReason, str] = {
    BlockReason.REQUIRED_TASK_FAILED: "required task {task!r} did not pass, so the plan halted",
    BlockReason.BUDGET_CEILING: "the plan's USD budget is spent; no further dispatch",
    BlockReason.WALL_CLOCK_CEILING: "the plan's wall-clock ceiling was reached",
    BlockReason.DEPENDENCY_DID_NOT_PASS: "dependency {task!r} did not pass",
    BlockReason.STAGING_REFUSED: "its inputs could not be staged: {task}",
}


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Edge:
    source: str
    target: str
    label: str


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Machine:
    name: str
    initial: str
    states: tuple[str, ...]
    terminal: tuple[str, ...]
    edges: tuple[Edge, ...]
    # (source, target) of every edge: a step is taken three times per task, so one set lookup
    _pairs: frozenset[tuple[str, str]] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_pairs", frozenset((edge.source, edge.target) for edge in self.edges))

    def step(self, current: str, target: str) -> str:
        """The target state, if the table has that edge; an edge it lacks is a bug, loudly."""
        if (current, target) in self._pairs:
            return target
        raise AssertionError(f"{self.name}: no edge {current} -> {target}")

    def to_dot(self) -> str:
        lines = [
            f'digraph "{self.name}" {{',
            "  rankdir=LR;",
            '  node [shape=box, style=rounded, fontname="sans"];',
        ]
        lines.append(f'  "__start" [shape=point]; "__start" -> "{self.initial}";')
        for state in self.states:
            shape = ", peripheries=2" if state in self.terminal else ""
            lines.append(f'  "{state}" [label="{state}"{shape}];')
        for edge in self.edges:
            lines.append(f'  "{edge.source}" -> "{edge.target}" [label="{edge.label}"];')
        lines.append("}")
        return "\n".join(lines)

    def to_mermaid(self) -> str:
        lines = ["stateDiagram-v2", f"  [*] --> {self.initial}"]
        for edge in self.edges:
            lines.append(f"  {edge.source} --> {edge.target}: {edge.label}")
        for state in self.terminal:
            lines.append(f"  {state} --> [*]")
        return "\n".join(lines)


def _edges(*rows: tuple[str, str, str]) -> tuple[Edge, ...]:
    return tuple(Edge(*row) for row in rows)


_SETTLED = tuple(status.value for status in TaskStatus)

TASK_MACHINE = Machine(
    name="plan task",
    initial="pending",
    states=("pending", "running", "retrying", *_SETTLED),
    terminal=_SETTLED,
    edges=_edges(
        ("pending", "running", "dependencies settled, join satisfied"),
        ("pending", "skipped", "advisory and unrunnable here (needs)"),
        ("pending", "skipped", "a dependency skipped"),
        ("pending", "truncated", "a required task can never run here"),
        *(("pending", "blocked", reason.value) for reason in BlockReason),
        ("running", "pass", "attempt passed, declared outputs present"),
        ("running", "fail", "measured failure (never retried)"),
        ("running", "skipped", "the task declared a skip"),
        ("running", "retrying", "transport failure, retries left"),
        ("running", "transport", "transport failure, retries spent"),
        ("running", "blocked", "budget_ceiling: overrun before a retry"),
        ("retrying", "running", "next attempt"),
        ("retrying", "blocked", "budget_ceiling"),
    ),
)


class PlanState(enum.StrEnum):
    ADMITTED = "admitted"
    RUNNING = "running"
    HALTED = "halted"  # a required task failed or a ceiling was reached: no new main dispatch
    EPILOGUE = "epilogue"
    FINISHED = "finished"  # every main task passed, skipped or was advisory
    FAILED = "failed"  # a required task did not pass
    BUDGET = "budget"  # the USD ceiling was overrun
    TRUNCATED = "truncated"  # a required task can never run on this substrate
    STOPPED = "stopped"  # an operator or a signal stopped dispatch; what ran settled


PLAN_MACHINE = Machine(
    name="plan",
    initial=PlanState.ADMITTED.value,
    states=tuple(state.value for state in PlanState),
    terminal=("finished", "failed", "budget", "truncated", "stopped"),
    edges=_edges(
        ("admitted", "truncated", "a required task is unrunnable: nothing dispatched"),
        ("admitted", "running", "plan_admitted written"),
        ("running", "running", "a task settled; dispatch what is ready"),
        ("running", "halted", "a required task did not pass"),
        ("running", "halted", "budget overrun"),
        ("running", "epilogue", "main graph settled"),
        ("running", "finished", "main graph settled, no epilogue"),
        ("halted", "epilogue", "in-flight tasks settled; epilogue still reports"),
        ("halted", "failed", "in-flight tasks settled, no epilogue"),
        ("halted", "budget", "ceiling reached: the epilogue does not spend"),
        ("epilogue", "epilogue", "an epilogue task settled"),
        ("epilogue", "finished", "epilogue settled; main graph passed"),
        ("epilogue", "failed", "epilogue settled; main graph failed"),
        ("running", "stopped", "stopped: in-flight tasks settled, the rest never dispatched"),
        ("halted", "stopped", "stopped while halted: in-flight tasks settled"),
        ("epilogue", "stopped", "stopped during the epilogue: in-flight tasks settled"),
    ),
)

MACHINES = {"task": TASK_MACHINE, "plan": PLAN_MACHINE}


def render(fmt: str) -> str:
    if fmt == "dot":
        return "\n\n".join(machine.to_dot() for machine in MACHINES.values()) + "\n"
    if fmt == "mmd":
        return "\n\n".join(machine.to_mermaid() for machine in MACHINES.values()) + "\n"
    rows = []
    for machine in MACHINES.values():
        rows.append(f"{machine.name}: {' '.join(machine.states)}")
        rows.extend(f"  {e.source} -> {e.target}: {e.label}" for e in machine.edges)
    rows.append("blocked reasons: " + ", ".join(r.value for r in BlockReason))
    return "\n".join(rows) + "\n"
