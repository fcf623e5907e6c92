"""`crucible escalate`: the agent's sanctioned way to say no change here can be judged fairly."""

from __future__ import annotations

import os
from pathlib import Path

import click

from crucible_core.run.escalation import CATEGORIES


@click.command("escalate")
@click.option(
    "--category", type=click.Choice(CATEGORIES), required=True, help="What kind of problem this is."
)
@click.option("--reason", required=True, help="Why the run cannot succeed as specified.")
@click.option("--evidence", multiple=True, help="What shows it (command output, file excerpts); repeatable.")
@click.option(
    "--workspace",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="The run's workspace (default: $CRUCIBLE_WORKSPACE, else the current directory).",
)
def command(category: str, reason: str, evidence: tuple[str, ...], workspace: Path | None) -> None:
    """Write ESCALATION.json for the loop: after this turn it restores the last kept state and ends
    the run as escalated (exit 2) for a human to look at. End your turn after calling it.
    """
    from crucible_core.run.escalation import make, write_marker

    escalation = make(category, reason, evidence)
    where = workspace or Path(os.environ.get("CRUCIBLE_WORKSPACE") or ".")
    path = write_marker(where, escalation)
    click.echo(f"escalation written to {path}; end your turn now")
