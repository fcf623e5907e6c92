"""`crucible show`: an offline view of any run's session log, live or finished, ours or crucible's."""

from __future__ import annotations

import json
from pathlib import Path

import click

from crucible_core.cli.options import manifest_option, manifest_or_pack, pack_option, state_dir_option


def session_path(manifest: Path, state_dir: Path | None, session: Path | None) -> Path:
    if session is not None:
        return session
    from crucible_core.control.client import state_dir_for

    return state_dir_for(manifest, state_dir) / "session.jsonl"


def show_log(path: Path, as_json: bool) -> None:
    """Print the view of the log at `path`; a missing log is a WorkspaceError.

    A playbook's or a plan file's log is shown as its tasks (flow/task_view.py), a loop's as its rows.
    """
    from crucible_core.contract.fold import fold_path
    from crucible_core.contract.run_kind import RunKind
    from crucible_core.errors import WorkspaceError
    from crucible_core.flow.decode import read_kind
    from crucible_core.run.run_view import render_text, run_view

    if not path.is_file():
        raise WorkspaceError(
            f"no session log at {path}", hint="pass --session FILE or --state-dir DIR of a crucible run"
        )
    if read_kind(path) is not RunKind.LOOP:  # it read a plan_admitted line: the log has events
        from crucible_core.flow.decode import read_session
        from crucible_core.flow.fold import fold_flow
        from crucible_core.flow.task_view import task_document, task_lines

        model = fold_flow(read_session(path))
        click.echo(json.dumps(task_document(model)) if as_json else "\n".join(task_lines(model)))
        return
    folded = fold_path(path)
    if folded.events == 0:
        raise WorkspaceError(
            f"{path} holds no readable session events", hint="is this a crucible session log?"
        )
    view = {"kind": RunKind.LOOP.value, **run_view(folded)}
    click.echo(json.dumps(view) if as_json else render_text(view))


@click.command("show")
@manifest_option
@pack_option
@state_dir_option
@click.option(
    "--session",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="A session.jsonl to read (overrides --state-dir and --manifest).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(
    manifest: Path, pack: str | None, state_dir: Path | None, session: Path | None, as_json: bool
) -> None:
    """Show a run from its session log: rows, best, baseline, kept, spend, outcome and resumes.

    A playbook or a plan file: its tasks (status, time, attempts, cost, note, output), verdict and outcome.
    """
    manifest = manifest_or_pack(manifest, pack, None, prepare=False)
    show_log(session_path(manifest, state_dir, session), as_json)
