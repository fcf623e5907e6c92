"""`crucible show`: an offline view of any run's session log, live or finished, ours or crucible's."""

from __future__ import annotations

import json
from pathlib import Path

import click

from crucible_core.cli.options import manifest_option, state_dir_option


def session_path(manifest: Path, state_dir: Path | None, session: Path | None) -> Path:
    if session is not None:
        return session
    from crucible_core.control.client import state_dir_for

    return state_dir_for(manifest, state_dir) / "session.jsonl"


def show_log(path: Path, as_json: bool) -> None:
    """Print the view of the log at `path`; a missing log is a WorkspaceError."""
    from crucible_core.contract.decide import shown_decision
    from crucible_core.contract.fold import fold_path
    from crucible_core.errors import WorkspaceError
    from crucible_core.run.run_view import render_text, run_view

    if not path.is_file():
        raise WorkspaceError(
            f"no session log at {path}", hint="pass --session FILE or --state-dir DIR of a crucible run"
        )
    folded = fold_path(path)
    if folded.events == 0:
        raise WorkspaceError(
            f"{path} holds no readable session events", hint="is this a crucible session log?"
        )
    view = run_view(folded)
    # every view's word for a discard without a valid reading: `invalid` (contract/decide.py)
    for shown, row in zip(view["rows"], folded.rows, strict=True):
        shown["decision"] = shown_decision(row.decision, row.valid)
    click.echo(json.dumps(view) if as_json else render_text(view))


@click.command("show")
@manifest_option
@state_dir_option
@click.option(
    "--session",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="A session.jsonl to read (overrides --state-dir and --manifest).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(manifest: Path, state_dir: Path | None, session: Path | None, as_json: bool) -> None:
    """Show a run from its session log: rows, best, baseline, kept, spend, outcome and resumes."""
    show_log(session_path(manifest, state_dir, session), as_json)
