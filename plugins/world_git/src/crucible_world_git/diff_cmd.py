"""`crucible diff`: the change a kept iteration made, or the whole best-vs-baseline change, from the world's memory.

Any world with a `change()` can answer (a composite, the test kit's); the command lives here
because the git worlds are the ones that keep every kept state as a commit to diff.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from crucible_core import api
from crucible_core.api import UsageError, WorkspaceError


@click.command("diff")
@api.manifest_option
@api.state_dir_option
@api.session_option
@click.option("--best", "best", is_flag=True, help="The best kept state against the baseline (the default).")
@click.option("--iter", "iteration", type=int, default=None, help="The change kept iteration N made.")
@click.option("--stat", "stat", is_flag=True, help="A diffstat instead of the full diff.")
def command(
    manifest: Path,
    state_dir: Path | None,
    session: Path | None,
    best: bool,
    iteration: int | None,
    stat: bool,
) -> None:
    """Show what a run kept: read the kept states from the session log, the change from the world.

    Only kept iterations have a change to show: a discarded one was rolled back.
    """
    from crucible_core.api import (
        RunPaths,
        Shell,
        engine_environment,
        load_manifest,
        load_plugins,
        plain,
        read_session,
        world_of,
    )
    from crucible_world_git.diffstat import render_diffstat
    from crucible_world_git.kept_states import best_change, iteration_change

    if best and iteration is not None:
        raise UsageError("--best and --iter are exclusive", hint="pick one")
    plugins = load_plugins()
    loaded = load_manifest(manifest, plugins=plugins)
    paths = RunPaths.resolve(loaded, state_dir=state_dir)
    log = api.session_log_path(manifest, state_dir, session)
    if not log.is_file():
        raise WorkspaceError(f"no session log at {log}", hint=api.missing_log_hint(manifest, session))
    events = read_session(log)
    wanted = iteration_change(events, iteration) if iteration is not None else best_change(events)
    if not paths.workspace.is_dir():
        raise WorkspaceError(f"no workspace at {paths.workspace}", hint="the run's world is gone")
    shell = Shell(cwd=paths.workspace, env=engine_environment())
    spared = tuple(paths.spared_in_workspace())
    world = world_of(plugins, loaded, paths, shell, _no_notes, spared=spared, world_record=False)
    if not callable(getattr(world, "change", None)):
        raise UsageError(
            f"the {loaded.world_kind!r} world cannot show changes", hint="its plugin has no change()"
        )
    diff = world.change(wanted.head, wanted.base)
    text = render_diffstat(diff) if stat else diff
    if sys.stdout.isatty():
        # the agent wrote the content: on a terminal none of its escapes runs (piped, the diff
        # stays byte for byte what was kept, for `git apply`)
        text = "".join(plain(line, tabs=True) + "\n" for line in text.splitlines())
    click.echo(text, nl=False)


def _no_notes(text: str) -> None:
    """Showing a change repairs nothing worth a note: there is no session log to write to."""
