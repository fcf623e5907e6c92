"""The DSL's constructors, which lane each belongs to, and the arguments each accepts.

The table is the single source for what is in scope: the compiler binds only the constructors
of the declared lane, so naming a scored-lane constructor in a playbook is an unknown name
where it was written, and suggestions are drawn from the same lane-filtered names.
"""

from __future__ import annotations

import attrs

from crucible_core.api import SCORED_WORKFLOW_TYPES as SCORED
from crucible_core.api import WORKFLOW_TYPES

ALL = frozenset(WORKFLOW_TYPES)

# Keyword arguments every task constructor takes (the plan IR's shared keys, DSL spelling).
TASK_KWARGS = (
    "name",
    "depends_on",
    "join",
    "required",
    "needs",
    "isolated",
    "emits",
    "emits_files",
    "stage",
    "retries",
    "timeout",
)


@attrs.frozen
class Constructor:
    name: str
    lanes: frozenset[str]
    kwargs: tuple[str, ...]
    positional: tuple[str, ...] = ()
    summary: str = ""
    task: bool = True  # returns a task (so it counts toward "constructed but not listed")


CONSTRUCTORS: dict[str, Constructor] = {
    c.name: c
    for c in (
        Constructor(
            "agent",
            ALL,
            (*TASK_KWARGS, "prompt", "session", "harness", "model", "effort"),
            summary="an agent turn driven by a prompt",
        ),
        Constructor(
            "skill",
            ALL,
            (*TASK_KWARGS, "skill", "args", "session", "harness", "model", "effort"),
            summary="an agent turn whose prompt is <skill>/SKILL.md plus its arguments",
        ),
        Constructor("command", ALL, (*TASK_KWARGS, "run"), summary="a shell command in the workspace"),
        Constructor(
            "evaluate",
            ALL,
            (*TASK_KWARGS, "run", "threshold", "direction"),
            summary="a measurement command whose last stdout line is a JSON object",
        ),
        Constructor(
            "session",
            ALL,
            ("name", "harness", "model", "effort"),
            summary="a durable agent conversation with optional agent defaults",
            task=False,
        ),
        Constructor("prompt_file", ALL, (), ("path",), "a UTF-8 file below the pack directory", task=False),
        Constructor("param", ALL, (), ("name",), "a launch parameter's value", task=False),
        Constructor(
            "workflow",
            ALL,
            ("type", "tasks", "result"),
            ("tasks",),
            "the final expression: lane, shipped tasks, result",
            task=False,
        ),
        Constructor("propose", SCORED, (*TASK_KWARGS, "session"), summary="the loop's candidate turn"),
        Constructor("apply", SCORED, TASK_KWARGS, summary="make the candidate live through the World"),
        Constructor("measure", SCORED, TASK_KWARGS, summary="the manifest's frozen judge, once"),
        Constructor(
            "grade",
            SCORED,
            (*TASK_KWARGS, "evidence", "score", "tiebreak"),
            summary="fold evaluation evidence into a measurement",
        ),
        Constructor(
            "decide", SCORED, (*TASK_KWARGS, "measurement"), summary="the engine's keep-or-discard rule"
        ),
        Constructor("top_k", SCORED, (*TASK_KWARGS, "k", "direction"), summary="the k best inputs by score"),
        Constructor(
            "default_autoresearch",
            SCORED,
            (),
            ("extra_tasks",),
            "the built-in propose/apply/measure/decide loop plus extra tasks",
            task=False,
        ),
    )
}


def in_lane(lane: str) -> dict[str, Constructor]:
    return {name: c for name, c in CONSTRUCTORS.items() if lane in c.lanes}
