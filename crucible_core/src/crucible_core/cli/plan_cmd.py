"""`crucible plan`: work graphs. Core prints the state machines; plugins add `run` and `show`.

A plugin adds a subcommand here by registering a command named "plan <name>" (crucible-plugin-
lane-plan registers "plan run" and "plan show"); a standard one left uninstalled is named.
"""

from __future__ import annotations

import click

from crucible_core.cli.plan_exposure_cmd import command as exposure


class PlanGroup(click.Group):
    """Core's subcommands plus the "plan <name>" commands plugins register."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from crucible_core.plugins import load_plugins

        added = load_plugins().registry("command", strict=False).entries
        return sorted(
            {*self.commands, *(name.removeprefix("plan ") for name in added if name.startswith("plan "))}
        )

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        from crucible_core.plugins import load_plugins
        from crucible_core.registry import Registry, provider_of

        registry: Registry[click.Command] = load_plugins().registry("command")
        if f"plan {cmd_name}" in registry:
            return registry.entries[f"plan {cmd_name}"].value
        provider = provider_of("command", f"plan {cmd_name}")  # a standard plugin's, left uninstalled
        if provider is not None:
            raise click.UsageError(
                f"no such command {cmd_name!r} (`pip install {provider}` provides it)", ctx
            )
        return None


@click.group("plan", cls=PlanGroup)
def command() -> None:
    """Work graphs: validate, show and run a plan file ([[task]])."""


@command.command("states")
@click.option("--format", "fmt", type=click.Choice(("dot", "mmd", "text")), default="text", show_default=True)
def states(fmt: str) -> None:
    """Print the executor's task and plan state machines, from the tables it walks."""
    from crucible_core.plan.states import render

    click.echo(render(fmt), nl=False)


# `crucible plan exposure`: a pack's resolved output bounds and disclosure (docs/broker.md).
command.add_command(exposure)
