"""crucible-plugin-lane-playbook: the playbook lane, a judgeless run of a manifest's graph, once.

A manifest whose workflow type is "playbook" runs through this lane (lane.py): one pass of its
task graph under `--max-cost` and `--max-time`, its workspace made as the loop's is
(workspace.py, or one per component of a composite, composite.py) and its history kept by the
"git" workspace memory (the git world plugin's). Only the registration lives here: the lane's
modules load when a playbook is prepared or checked, so `crucible --help` does not pay for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:  # type-only: naming them here loads nothing of core when plugins are listed
    from crucible_core.api import Ending, Lane, LaneContext, LaneSpec, LoadedManifest, Plugins, Register


def _prepare(context: LaneContext) -> Lane | Ending:
    from crucible_lane_playbook.lane import prepare_playbook

    return prepare_playbook(context)


def _check(plugins: Plugins, loaded: LoadedManifest) -> list[tuple[str, str]]:
    from crucible_lane_playbook.workspace import check_memory

    return check_memory(plugins)


def _spec() -> LaneSpec:
    from crucible_core.api import LaneSpec

    return LaneSpec(prepare=_prepare, check=_check)


@hookimpl
def crucible_register_lanes(register: Register[LaneSpec]) -> None:
    from crucible_core.api import Deferred

    # Deferred: LaneSpec is an attrs class, and listing plugins must build none (issue 27)
    register("playbook", Deferred(_spec))
