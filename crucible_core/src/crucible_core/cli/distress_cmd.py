"""`crucible distress`: the agent pages a human; error suspends the run, warn and info leave a note."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from crucible_core.cli.options import manifest_option, state_dir_option
from crucible_core.run.distress import ENV_DIR, SEVERITIES


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
def command(
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
    from crucible_core.control.client import state_dir_for
    from crucible_core.run.distress import add_note, make, raise_error

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
