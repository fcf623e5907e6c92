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
