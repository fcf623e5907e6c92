"""`crucible completion SHELL`: print the shell completion script click generates for crucible."""

from __future__ import annotations

import click

SHELLS = ("bash", "zsh", "fish")


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def command(shell: str) -> None:
    """Print the completion script for SHELL (bash, zsh or fish); see docs/cli.md to install it."""
    from click.shell_completion import get_completion_class

    from crucible_core.cli.main import cli

    completion_class = get_completion_class(shell)
    assert completion_class is not None  # click ships all three
    script = completion_class(cli, {}, "crucible", "_CRUCIBLE_COMPLETE").source()
    click.echo(script)
