"""`crucible help [TOPIC]`: the user guides (docs/*.md) as shipped inside crucible-core.

A wheel carries the guides as package data (crucible_core/docs, copied in by the build hook);
an editable install from a clone reads the repository's docs/ directly, so the two never drift.
"""

from __future__ import annotations

import difflib
from importlib import resources
from pathlib import Path

import click

from crucible_core.errors import UsageError


def docs_dir() -> Path | None:
    """Where the guides are: the installed package data, else the clone's docs/ (editable installs)."""
    shipped = Path(str(resources.files("crucible_core"))) / "docs"
    if shipped.is_dir():
        return shipped
    clone = Path(__file__).resolve().parents[4] / "docs"  # <clone>/crucible_core/src/crucible_core/cli
    return clone if clone.is_dir() else None


def topics() -> dict[str, Path]:
    root = docs_dir()
    if root is None:
        return {}
    return {path.stem: path for path in sorted(root.glob("*.md"))}


def title(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


@click.command("help")
@click.argument("topic", required=False)
def command(topic: str | None) -> None:
    """Show a user guide (manifest, cli, plugins, ...); without TOPIC, list the guides.

    A command name shows that command's --help.
    """
    found = topics()
    if topic is None:
        if not found:
            raise UsageError("this installation carries no guides", hint="reinstall crucible-core")
        click.echo("Guides (crucible help TOPIC):")
        width = max(len(name) for name in found)
        for name, path in found.items():
            click.echo(f"  {name.ljust(width)}  {title(path)}")
        click.echo("\nCommands: crucible --help; one command: crucible help COMMAND")
        return
    if topic in found:
        click.echo(found[topic].read_text(encoding="utf-8"))
        return
    ctx = click.get_current_context()
    group = ctx.parent.command if ctx.parent else None
    if isinstance(group, click.Group):
        sub = group.get_command(ctx, topic)
        if sub is not None:
            with click.Context(sub, info_name=topic, parent=ctx.parent) as sub_ctx:
                click.echo(sub.get_help(sub_ctx))
            return
    close = difflib.get_close_matches(topic, list(found), n=1)
    raise UsageError(
        f"no guide or command named {topic!r}; guides: {', '.join(found) or 'none'}",
        hint=f"did you mean {close[0]!r}?" if close else "run `crucible help` for the list",
    )
