"""crucible-plugin-scope: `crucible scope`, a hand-written domain pack taken to a frozen SCOPE.md.

The pipeline (ADR-0014 S0 and S1) lives in pipeline.py: ingest the goal (goal.py, a GitHub
issue read through its REST API or a file), check the pack as `crucible check` does, draw the
graph a run executes (layout.py, draw.py) and freeze SCOPE.md with the RunIdentity digest a
later `crucible run` reports (freeze.py). Only the registration lives here: the command loads
when `crucible scope` asks for it.
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

    register("scope", Deferred("crucible_scope.cli:scope"))
