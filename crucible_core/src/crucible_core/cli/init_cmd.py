"""`crucible init`: scaffold a minimal crucible.toml and a measure stub, never overwriting anything."""

from __future__ import annotations

import os
from pathlib import Path

import click

from crucible_core.errors import WorkspaceError

MANIFEST = """\
# crucible manifest: see docs/manifest.md for every key.

[repo]
path = "."                 # the repository the agent edits a copy of

[workspace]
dir = "workspace"          # where that copy lives (add workspace/ and state/ to .gitignore)
inject = ["measure.sh"]    # the gate: copied in and re-copied before every measure

[agent]
backend = "local"          # the Claude Code CLI on this host; "command" runs agent_cmd instead
goal = "Describe what the agent should improve."

[judge]
measure_cmd = "./measure.sh"
direction = "lower"        # or "higher"
objective = "score"
"""

MEASURE = """\
#!/bin/sh
# The judge: print one JSON line {"valid": bool, "score": number, "solved": bool, "note": str}.
# This stub always reports the same score; point it at your real benchmark or test suite.
printf '{"valid": true, "score": 0, "note": "stub measure: replace me"}\\n'
"""


@click.command("init")
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("."),
    show_default=True,
    help="Where to write crucible.toml and measure.sh.",
)
def command(directory: Path) -> None:
    """Scaffold a crucible.toml and a measure stub. Refuses to overwrite existing files."""
    manifest, measure = directory / "crucible.toml", directory / "measure.sh"
    existing = [str(p) for p in (manifest, measure) if p.exists()]
    if existing:
        raise WorkspaceError(
            f"refusing to overwrite {', '.join(existing)}",
            hint="edit the existing files, or run `crucible init --dir` somewhere else",
        )
    directory.mkdir(parents=True, exist_ok=True)
    manifest.write_text(MANIFEST, encoding="utf-8")
    measure.write_text(MEASURE, encoding="utf-8")
    os.chmod(measure, 0o755)
    click.echo(f"wrote {manifest} and {measure}")
    click.echo(f"next: edit both, then `crucible check --manifest {manifest}`")
