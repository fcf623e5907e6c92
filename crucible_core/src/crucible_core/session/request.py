"""One request for every kind of run, and what the session answers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.errors import ExitCode
from crucible_core.run.budget import Budget
from crucible_core.run.engine import RunOptions

if TYPE_CHECKING:
    from crucible_core.lanes.lane import Ending, Lane
    from crucible_core.plugins import Plugins
    from crucible_core.run.state_lock import StateLock

# Prepares a run that has no manifest (a plan file's): its lane, or the Ending of one already ended.
PrepareLane = Callable[["Plugins", "SessionRequest", Callable[[Path], "StateLock"]], "Lane | Ending"]


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class TaskOptions:
    """What a playbook or a plan file adds: how its graph's tasks are dispatched and bounded."""

    jobs: int | None = None  # tasks in flight at once (None: the number of CPUs)
    max_asks: int = 20  # asks the run's tasks may emit in all
    max_task_timeout: float = 86_400.0  # the longest deadline a task may declare
    task_timeout: float = 1800.0  # the deadline of a task that declares none (a playbook's)


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class SessionRequest:
    """A run to start or resume: a manifest (the loop or a playbook, whichever it declares) or a run
    with no manifest that the plugin command asking for it prepares (`crucible plan run`, with
    crucible-plugin-lane-plan). Exactly one of `manifest` and `prepare_lane` is set."""

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
    prepare_lane: PrepareLane | None = None

    def __attrs_post_init__(self) -> None:
        if (self.manifest is None) == (self.prepare_lane is None):
            raise ValueError(
                "a session request names a manifest or a lane to prepare, not both and not neither"
            )


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class SessionResult:
    outcome: str  # the shutdown outcome written last (for a resume of an ended run: the one recorded)
    reason: str
    exit_code: ExitCode
