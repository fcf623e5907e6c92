"""Options several commands share: finding the manifest and the state directory."""

from __future__ import annotations

from pathlib import Path

import click

manifest_option = click.option(
    "--manifest",
    "-m",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("crucible.toml"),
    show_default=True,
    help="The run's crucible.toml.",
)
state_dir_option = click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Runtime state directory (default: <manifest dir>/state).",
)
session_option = click.option(
    "--session",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The run's session log (default: <state dir>/session.jsonl).",
)


def session_log_path(manifest: Path, state_dir: Path | None, session: Path | None) -> Path:
    """The session log a read-only command looks at: --session, else the manifest's state dir."""
    if session is not None:
        return session
    return (state_dir or manifest.parent / "state") / "session.jsonl"
