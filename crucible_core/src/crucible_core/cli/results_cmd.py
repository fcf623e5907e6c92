"""`crucible results`: a run's outcome from its session log, as a table or as JSON for scripts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from crucible_core.cli.options import manifest_option, session_log_path, session_option, state_dir_option
from crucible_core.errors import WorkspaceError


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


@click.command("results")
@manifest_option
@state_dir_option
@session_option
@click.option("--json", "as_json", is_flag=True, help="One JSON document: best, baseline, kept, rows.")
def command(manifest: Path, state_dir: Path | None, session: Path | None, as_json: bool) -> None:
    """Print a run's results from its session log (a live run's too: it reads what is written)."""
    from crucible_core.contract.plain_text import plain
    from crucible_core.flow.decode import read_session
    from crucible_core.flow.fold import fold_flow
    from crucible_core.flow.model import versus_baseline
    from crucible_core.flow.results import results_document

    log = session_log_path(manifest, state_dir, session)
    if not log.is_file():
        raise WorkspaceError(f"no session log at {log}", hint="pass --session, or --manifest of a run")
    model = fold_flow(read_session(log))
    if model.is_task_run:  # a playbook or a plan file: its tasks, not an empty loop
        from crucible_core.flow.task_view import task_document, task_lines

        click.echo(json.dumps(task_document(model), indent=2) if as_json else "\n".join(task_lines(model)))
        return
    doc = results_document(model)
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return

    def versus(score: float | None) -> str:  # a percentage, or the change itself from a baseline of 0
        return versus_baseline(doc["baseline"], score, doc["direction"])

    gain = f" ({versus(doc['best'])})" if versus(doc["best"]) else ""
    invalid = f" ({doc['invalid']} invalid)" if doc["invalid"] else ""
    # what the log holds is printed plain: a note is the measure's words, no escape of it runs
    click.echo(
        f"{plain(doc['objective'] or 'run')}: best {_cell(doc['best'])} vs baseline {_cell(doc['baseline'])}{gain}, "
        f"{doc['direction']} is better; kept {doc['kept']}, discarded {doc['discarded']}{invalid}; "
        f"outcome {doc['outcome']}"
    )
    for row in doc["rows"]:
        where = "wide" if row["iter"] == 0 else str(row["iter"])  # the round before iteration 1
        click.echo(
            f"{where:>5}  {row['decision']:<8} {_cell(row['score']):>10} {_cell(row['best']):>10} "
            f"{versus(row['score']):>8}  {plain(row['note'])[:80]}"
        )
