"""The `crucible` entry point: the command group, error rendering and exit codes."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click

from crucible_core import __version__, start_up
from crucible_core.cli.command_line import normalize, only_help
from crucible_core.control.orders import ORDERS
from crucible_core.errors import CrucibleError, ExitCode

# Built-in commands, imported only when invoked so `crucible --help` stays fast.
BUILTIN_COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("crucible_core.cli.run_cmd", "Run the keep/discard loop over a manifest."),
    "check": ("crucible_core.cli.check_cmd", "Validate a manifest and its gate without an agent turn."),
    "plugins": ("crucible_core.cli.plugins_cmd", "List installed plugins, their hooks and names."),
    "help": ("crucible_core.cli.help_cmd", "Show a user guide (manifest, cli, plugins, ...)."),
    "workflow": (
        "crucible_core.cli.workflow_cmd",
        "Compile workflow.star to its [workflow] IR; print its params.",
    ),
    "plan": ("crucible_core.cli.plan_cmd", "Run, show or chart a work graph (a plan file of [[task]])."),
    "show": ("crucible_core.cli.show_cmd", "Show any run from its session log (offline, live or finished)."),
    "services": ("crucible_core.cli.services_cmd", "List installed service tools; write catalog entries."),
    # looking at a run, live or finished
    "results": ("crucible_core.cli.results_cmd", "Print a run's results (best, baseline, rows)."),
    "completion": ("crucible_core.cli.completion_cmd", "Print a shell completion script (bash, zsh, fish)."),
    # operator control of a live run (module:attribute when one module holds several commands)
    "status": ("crucible_core.cli.control_cmd:status", "Show where a live run stands."),
    # one per operator order, from the table the whole core reads (control/orders.py)
    **{order.command: (f"crucible_core.cli.control_cmd:{order.command}", order.summary) for order in ORDERS},
}


class CrucibleGroup(click.Group):
    """Lazy built-ins plus commands plugins register through crucible_register_commands."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*BUILTIN_COMMANDS, *_plugin_commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in BUILTIN_COMMANDS:
            module_name, _, attr = BUILTIN_COMMANDS[cmd_name][0].partition(":")
            module = __import__(module_name, fromlist=["command"])
            found: click.Command = getattr(module, attr or "command")
            start_up.settle()  # the command's imports are in: its own work collects again
            return found
        from crucible_core.plugins import load_plugins

        registry = load_plugins().registry("command")
        start_up.settle()
        return registry.entries[cmd_name].value if cmd_name in registry else None

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if args and self.get_command(ctx, name) is None and not name.startswith("-"):
            from crucible_core.registry import provider_of

            provider = provider_of("command", name)  # a standard plugin's command, left uninstalled
            hint = f" (`pip install {provider}` provides it)" if provider else _did_you_mean(ctx, self, name)
            raise click.UsageError(f"no such command {name!r}{hint}", ctx)
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, BUILTIN_COMMANDS[name][1]) for name in sorted(BUILTIN_COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)
        added = _plugin_commands()
        if added:
            with formatter.section("Commands from plugins"):
                formatter.write_dl(sorted(added.items()))
        formatter.write_paragraph()
        formatter.write_text("`crucible plugins` lists the installed plugins and what each adds.")


def _plugin_commands() -> dict[str, str]:
    from crucible_core.cli.plugin_commands import plugin_commands

    return plugin_commands(frozenset(BUILTIN_COMMANDS))


def _did_you_mean(ctx: click.Context, group: CrucibleGroup, name: str) -> str:
    """` (did you mean 'run'?)` for a mistyped command, built-in or a plugin's; "" when none is close."""
    import difflib

    close = difflib.get_close_matches(name, group.list_commands(ctx), n=1, cutoff=0.6)  # plugins' too
    return f" (did you mean {close[0]!r}?)" if close else ""


@click.group(cls=CrucibleGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="crucible", message="%(prog)s %(version)s")
def cli() -> None:
    """crucible: let a coding agent improve a codebase against a frozen objective.

    Each iteration the agent proposes one change, a judge it cannot touch measures it once,
    and the change is kept (a git commit) only if it is strictly better.

    `crucible --manifest X [flags]` is shorthand for `crucible run --manifest X [flags]`.
    """


def usage_error_line(exc: click.ClickException) -> str:
    """click's error as crucible's one documented line: what was wrong, then where help is."""
    message = " ".join(exc.format_message().split())
    message = message[:1].lower() + message[1:]
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "crucible"
    return f"crucible: error: {message.rstrip('.')} (see `{command} --help`)"


def main(argv: Sequence[str] | None = None) -> None:
    args = normalize(list(sys.argv[1:] if argv is None else argv))
    if argv is None and not only_help(args):
        # Started as the `crucible` command: this process starts its children only through the
        # supervisor, so it may adopt their orphans (a cheaper sweep; see process.py). Called
        # in-process with arguments (tests, embedding), it leaves the host process as it is.
        # Help, the version and the print-only commands start no child, and skip the supervisor's import.
        # Imports make long-lived objects only: no collection until start_up.settle freezes them
        # (the supervisor's import below brings attrs and pathlib: some 20 collections before).
        # The console script began it before this module was imported (console_script.py).
        start_up.begin()
        # First, before any record class is defined: the code attrs and cattrs generate is
        # compiled once and kept between processes (generated_code.py).
        from crucible_core import generated_code

        generated_code.install()
        from crucible_core import process

        process.adopt_orphans()
    try:
        code = cli.main(args=args, prog_name="crucible", standalone_mode=False)
    except CrucibleError as exc:
        click.echo(f"crucible: error: {exc.render()}", err=True)
        sys.exit(int(exc.exit_code))
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(int(ExitCode.USAGE))
    except click.ClickException as exc:  # usage errors, bad parameters, unreadable files
        click.echo(usage_error_line(exc), err=True)
        sys.exit(int(ExitCode.USAGE))
    except click.exceptions.Abort:
        click.echo("crucible: aborted", err=True)
        sys.exit(int(ExitCode.STOPPED))
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:
        if os.environ.get("CRUCIBLE_DEBUG"):
            raise
        click.echo(
            f"crucible: internal error: {type(exc).__name__}: {exc} "
            "(set CRUCIBLE_DEBUG=1 for a traceback and report it)",
            err=True,
        )
        sys.exit(int(ExitCode.INTERNAL))
    sys.exit(int(code) if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
