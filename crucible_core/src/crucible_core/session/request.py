"""One request for every kind of run, and what the session answers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import attrs

from crucible_core.errors import ExitCode
from crucible_core.run.budget import Budget
from crucible_core.run.engine import RunOptions


@attrs.frozen
class TaskOptions:
    """What a playbook or a plan file adds: how its graph's tasks are dispatched and bounded."""

    jobs: int | None = None  # tasks in flight at once (None: the number of CPUs)
    max_asks: int = 20  # asks the run's tasks may emit in all
    max_task_timeout: float = 86_400.0  # the longest deadline a task may declare
    task_timeout: float = 1800.0  # the deadline of a task that declares none (a playbook's)
    # A plan file only:
    workspace: Path | None = None  # the directory its tasks run in (default: the current one)
    agent_cmd: str | None = None  # a stand-in command for its agent tasks
    deploy_profile: Path | None = None  # where its tasks needing what this machine lacks run


@attrs.frozen
class SessionRequest:
    """A run to start or resume: a manifest (the loop or a playbook, whichever it declares) or a
    plan file (`crucible plan run`). Exactly one of `manifest` and `plan_file` is set."""

    manifest: Path | None = None
    budget: Budget = Budget()  # the loop's budget; a playbook's ceilings (max_cost, max_time)
    options: RunOptions = RunOptions()  # the loop's own knobs
    state_dir: Path | None = None
    steer: Path | None = None  # the loop's STEER.md channel
    ui: str = "console"  # the reporter that shows progress
    resume: bool = False
    max_park: float | None = None  # seconds an approval wait may park the run; None waits indefinitely
    params: Mapping[str, str] = attrs.field(factory=dict)  # run parameters (workflow, [outputs] targets)
    caps: frozenset[str] = frozenset()  # --cap: what this machine provides
    tasks: TaskOptions = TaskOptions()
    plan_file: Path | None = None

    def __attrs_post_init__(self) -> None:
        if (self.manifest is None) == (self.plan_file is None):
            raise ValueError("a session request names a manifest or a plan file, not both and not neither")


@attrs.frozen
class SessionResult:
    outcome: str  # the shutdown outcome written last (for a resume of an ended run: the one recorded)
    reason: str
    exit_code: ExitCode
