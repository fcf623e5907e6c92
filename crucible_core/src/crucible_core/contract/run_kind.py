"""Which kind of run wrote a session log, and a task run's verdict read back from it (pure).

Every view (`show`, `results`, `status`, the flow page) asks `run_kind` before it draws, so a
playbook or a plan file is never drawn as an empty loop. The answer comes from what the log
holds, never from a flag:

- a plan file's log (`crucible plan run`) has no `start` line: it opens with `plan_admitted`;
- a playbook's log has a `start` line carrying the task lane's gate label (`"task"`) and a
  `plan_admitted` line, which a playbook always writes;
- everything else is the loop: a scored loop's `start` carries its own gate label, and the
  task lane's loop (also `"task"`) admits no plan (a manifest without a judge accepts no
  workflow but a playbook). A scored workflow admits a graph inside each iteration, under a
  scored gate label, so it stays a loop.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import attrs

from crucible_core.contract.records import value_methods

TASK_GATE = "task"  # the task lane's gate label, which a playbook carries too (RFC-0002:C-PLAYBOOK-LANE)
EPILOGUE = "epilogue"
UNDISPATCHED = "undispatched"  # what the views call an ended run's task that has no result
# Outcomes that fail the verdict whatever the tasks say: an exhausted ceiling, an engine error.
_FAILING_OUTCOMES = frozenset({"budget", "error"})
_PASSING_STATUSES = frozenset({"pass", "skipped"})
# What each lane calls its verdict, as its run prints it.
_VERDICT_WORDS = {"playbook": ("valid", "invalid"), "plan": ("pass", "fail")}


class RunKind(enum.StrEnum):
    LOOP = "loop"
    PLAYBOOK = "playbook"
    PLAN = "plan"


def run_kind(*, started: bool, gate: str | None, plan_admitted: bool) -> RunKind:
    """The kind of run from its log: whether it has a `start` line, the first one's gate label,
    and whether it admitted a plan."""
    if not started:
        return RunKind.PLAN if plan_admitted else RunKind.LOOP
    return RunKind.PLAYBOOK if gate == TASK_GATE and plan_admitted else RunKind.LOOP


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class TaskStanding:
    """What the verdict reads of one admitted task: its place in the graph and how it settled."""

    required: bool
    stage: str
    status: str | None  # None: never settled


def task_verdict(tasks: Iterable[TaskStanding], outcome: str | None) -> str | None:
    """`pass` or `fail` for a finished playbook or plan, None while it has no `shutdown` line.

    As RFC-0002:C-PLAYBOOK-LANE defines it: a required main-graph task that did not pass (or
    skip) fails the run; an exhausted ceiling fails it; a task left unsettled fails it unless a
    task declared early completion (outcome `complete`); advisory and epilogue tasks never count.
    """
    if outcome is None:
        return None
    if outcome in _FAILING_OUTCOMES:
        return "fail"
    for task in tasks:
        if not task.required or task.stage == EPILOGUE:
            continue
        if task.status is None and outcome == "complete":
            continue  # left undispatched by early completion
        if task.status not in _PASSING_STATUSES:
            return "fail"
    return "pass"


def verdict_word(kind: str, verdict: str | None) -> str:
    """The verdict as the lane's own run prints it: a playbook is valid or invalid, a plan passes or fails."""
    if verdict is None:
        return "none yet"
    good, bad = _VERDICT_WORDS.get(kind, ("pass", "fail"))
    return good if verdict == "pass" else bad
