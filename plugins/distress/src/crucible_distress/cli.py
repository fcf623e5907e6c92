"""The agent's commands: `crucible distress` pages a human (error suspends the run, warn and info leave a
note); `crucible escalate` says no change here can be judged fairly (the run ends after the turn)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from crucible_core.api import manifest_option, state_dir_option
from crucible_distress.escalation import CATEGORIES
from crucible_distress.pages import ENV_DIR, SEVERITIES


@click.command("distress")
@click.option("--severity", type=click.Choice(SEVERITIES), required=True, help="error suspends the run.")
@click.option("--reason", required=True, help="What is wrong, and what you tried.")
@click.option("--evidence", multiple=True, help="What shows it (command output, file excerpts); repeatable.")
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help=f"Where the run reads distress (default: ${ENV_DIR}, else <state dir>/distress).",
)
@manifest_option
@state_dir_option
def distress_command(
    severity: str,
    reason: str,
    evidence: tuple[str, ...],
    directory: Path | None,
    manifest: Path,
    state_dir: Path | None,
) -> None:
    """Page a human about this run.

    error: the run cannot succeed without a human (the same environment failure every turn, a
    missing capability, an infeasible goal; not merely a hard task). The run suspends at its
    next iteration head, after this turn is recorded, until a human deletes the marker or runs
    `crucible approve`. Finish your turn after calling it. Repeating it while suspended changes
    nothing. warn, info: a note that reaches the run's log and its next row; the run goes on.

    Prints one JSON line: {"status": "suspending"} or {"status": "noted"}. Exit 11 when the
    marker or note could not be written: then nothing was raised, so do not claim it was.
    """
    from crucible_core.api import state_dir_for
    from crucible_distress.pages import add_note, make, raise_error

    iteration = os.environ.get("CRUCIBLE_ITERATION")
    distress = make(severity, reason, evidence, int(iteration) if iteration and iteration.isdigit() else None)
    env_dir = os.environ.get(ENV_DIR)
    where = directory or (Path(env_dir) if env_dir else state_dir_for(manifest, state_dir) / "distress")
    if severity == "error":
        fresh = raise_error(where, distress)
        reply = {"status": "suspending", **({} if fresh else {"already": True})}
    else:
        add_note(where, distress)
        reply = {"status": "noted"}
    click.echo(json.dumps(reply))


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
def escalate_command(category: str, reason: str, evidence: tuple[str, ...], workspace: Path | None) -> None:
    """Write ESCALATION.json for the loop: after this turn it restores the last kept state and ends
    the run as escalated (exit 2) for a human to look at. End your turn after calling it.
    """
    from crucible_distress.escalation import make as make_escalation
    from crucible_distress.escalation import write_marker

    escalation = make_escalation(category, reason, evidence)
    where = workspace or Path(os.environ.get("CRUCIBLE_WORKSPACE") or ".")
    path = write_marker(where, escalation)
    click.echo(f"escalation written to {path}; end your turn now")
