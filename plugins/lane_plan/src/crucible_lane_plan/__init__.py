"""crucible-plugin-lane-plan: plan files, standalone work graphs with no World and no Judge.

`crucible plan run FILE` runs one under the session (lane.py: the plan-file lane) and `crucible
plan show` prints an admitted graph, a plan file's or a manifest's (cli.py, render.py). Only the
registration lives here: the commands load when `crucible plan` asks for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:  # type-only: naming them here loads nothing of core when plugins are listed
    import click

    from crucible_core.api import Register


@hookimpl
def crucible_register_commands(register: Register[click.Command]) -> None:
    from crucible_core.api import Deferred

    # "plan <name>": a subcommand of core's `crucible plan` group, not a command of its own
    register("plan run", Deferred("crucible_lane_plan.cli:run"))
    register("plan show", Deferred("crucible_lane_plan.cli:show"))
