"""`crucible init`: scaffold a crucible.toml and the files it names from a template, never overwriting anything."""

from __future__ import annotations

import os
from pathlib import Path

import click

from crucible_core.errors import WorkspaceError
from crucible_core.init_templates import DEFAULT_TEMPLATE, TEMPLATES


@click.command("init")
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("."),
    show_default=True,
    help="Where to write the files (usually your repository's root).",
)
@click.option(
    "--template",
    "template_name",
    type=click.Choice(sorted(TEMPLATES)),
    default=DEFAULT_TEMPLATE,
    show_default=True,
    help="What to start from: " + "; ".join(f"{t.name}: {t.summary}" for t in TEMPLATES.values()) + ".",
)
def command(directory: Path, template_name: str) -> None:
    """Scaffold a crucible.toml and the files it names. Refuses to overwrite existing files."""
    template = TEMPLATES[template_name]
    targets = {rel: directory / rel for rel in template.files}
    existing = [str(p) for p in targets.values() if p.exists()]
    if existing:
        raise WorkspaceError(
            f"refusing to overwrite {', '.join(existing)}",
            hint="edit the existing files, or run `crucible init --dir` somewhere else",
        )
    directory.mkdir(parents=True, exist_ok=True)
    for rel, path in targets.items():
        path.write_text(template.files[rel], encoding="utf-8")
        if rel in template.executable:
            os.chmod(path, 0o755)
    click.echo(f"wrote {', '.join(str(p) for p in targets.values())} ({template.name} template)")
    click.echo(f"next: {template.next_step}")
