"""`crucible run`: run the loop over a manifest."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import click

from crucible_core.cli.options import (
    budget_cap,
    manifest_option,
    manifest_or_pack,
    pack_option,
    parse_params,
    repo_option,
    state_dir_option,
)
from crucible_core.durations import parse_duration
from crucible_core.lanes.loop import DEFAULT_ITERATIONS
from crucible_core.run.budget import Budget
from crucible_core.run.engine import RunOptions

# The engine-environment variable that carries --results-bucket to the plugin writing run records
# (crucible-plugin-run-records reads it from RunContext.engine_env; a user may export it instead).
RESULTS_ENV = "CRUCIBLE_RESULTS_BUCKET"


@click.command("run")
@manifest_option
@click.option(
    "--iterations",
    "-n",
    metavar="N",
    callback=budget_cap("iterations"),
    default=None,
    help=f"Agent turns to run, the baseline not counted (default {DEFAULT_ITERATIONS}; "
    "on --resume, the original run's).",
)
@click.option(
    "--max-cost",
    metavar="USD",
    callback=budget_cap("max_cost"),
    default=None,
    help="Stop once this many USD are spent.",
)
@click.option("--max-time", default=None, help="Stop after this much active wall-clock (90s, 15m, 2h).")
@click.option("--no-early-stop", is_flag=True, help="Keep iterating after a solved reading.")
@click.option("--harness", default=None, help="Override [agent].harness for this run.")
@click.option("--model", default=None, help="Override [agent].model for this run.")
@click.option(
    "--turn-timeout", default=None, help="Deadline for one agent turn (default: [agent].turn_timeout or 1h)."
)
@state_dir_option
@click.option(
    "--steer",
    "steer_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The STEER.md file channel (default: <manifest dir>/STEER.md).",
)
@click.option(
    "--ui",
    default="console",
    show_default=True,
    help="How progress is shown: any registered reporter (`crucible plugins` lists them); built in: "
    "console (lines for a person), headless (quiet), jsonl (every event as JSON).",
)
@click.option(
    "--wide",
    type=click.IntRange(min=0),
    default=None,
    help="Propose this many candidates at once before the deep loop (overrides [search].wide; 0: none).",
)
@click.option(
    "--wide-keep",
    type=click.IntRange(min=1),
    default=None,
    help="How many wide-round winners seed the deep loop (overrides [search].policy_k).",
)
@click.option("--resume", is_flag=True, help="Continue the run recorded in the state directory.")
@click.option(
    "--max-park",
    default=None,
    help="Longest an approval wait may park the run (90s, 15m, 2h); a timeout counts as a deny. "
    "Default: wait indefinitely.",
)
@pack_option
@repo_option
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="NAME=VALUE",
    help="A run parameter (repeatable): a workflow launch parameter, which an [outputs] open target "
    "with param = NAME must also equal. "
    "On --resume, the recorded ones unless given again.",
)
@click.option(
    "--cap",
    "caps",
    multiple=True,
    help="A capability this machine provides (repeatable): playbook tasks, the judge's measure and "
    "wide-round proposals ([search].needs) needing it run here.",
)
@click.option(
    "--max-asks", type=click.IntRange(0), default=20, show_default=True, help="Asks a playbook may emit."
)
@click.option(
    "--max-task-timeout",
    default="24h",
    show_default=True,
    help="Longest per-task deadline a playbook may declare.",
)
@click.option(
    "--task-timeout", default="30m", show_default=True, help="Deadline of a playbook task that declares none."
)
@click.option(
    "--results-bucket",
    metavar="URI",
    default=None,
    callback=lambda _ctx, _param, value: _results_address(value),
    help="Write the run's record (log, summary, diffs) to s3://bucket[/prefix] or file:///abs/path "
    f"(overrides [publish].record; the same as exporting {RESULTS_ENV}). Needs crucible-plugin-run-records.",
)
def command(
    manifest: Path,
    iterations: int | None,
    max_cost: float | None,
    max_time: str | None,
    no_early_stop: bool,
    harness: str | None,
    model: str | None,
    turn_timeout: str | None,
    state_dir: Path | None,
    steer_file: Path | None,
    ui: str,
    wide: int | None,
    wide_keep: int | None,
    resume: bool,
    max_park: str | None,
    pack: str | None,
    repo: Path | None,
    params: tuple[str, ...],
    caps: tuple[str, ...],
    max_asks: int,
    max_task_timeout: str,
    task_timeout: str,
    results_bucket: str | None,
) -> None:
    """Run the keep/discard loop over a manifest.

    Exit codes: 0 the run completed (iterations or budget spent, or solved); 2 the agent
    escalated; 3 stopped by an operator; 4 the run failed; 10 bad manifest (or [search].needs
    served nowhere); 11 workspace or
    state conflict; 12 unknown or duplicate plugin; 16 a manifest section this version does
    not support. See `crucible help cli`.
    """
    from crucible_core import start_up

    # Start-up goes on, without collection, through the session's modules, the plugins' and the
    # session's preparation; the session settles it before the run's first line (session/entry.py).
    start_up.goes_on()
    from crucible_core.plugins import load_plugins
    from crucible_core.session.entry import execute
    from crucible_core.session.request import SessionRequest, TaskOptions

    plugins = load_plugins()
    for failure in plugins.failures:
        click.echo(
            f"crucible: warning: plugin {failure.name} ({failure.distribution}) failed to load: "
            f"{failure.error}",
            err=True,
        )
    if results_bucket is not None:  # asked for by name: refused without the plugin that writes it
        plugins.registry("output kind").entry("run-record", where="--results-bucket")
    manifest = manifest_or_pack(manifest, pack, repo, prepare=True, plugins=plugins)
    # The session decides the lane from what the manifest declares (a playbook, or the loop); the
    # loop's default number of iterations is applied there, as a playbook takes none.
    request = SessionRequest(
        manifest=manifest,
        budget=Budget(
            iterations=iterations,
            max_cost=max_cost,
            max_time=parse_duration(max_time) if max_time else None,
        ),
        options=RunOptions(
            no_early_stop=no_early_stop,
            harness=harness,
            model=model,
            turn_timeout=parse_duration(turn_timeout) if turn_timeout else None,
            wide=wide,
            wide_keep=wide_keep,
        ),
        state_dir=state_dir,
        steer=steer_file,
        ui=ui,
        resume=resume,
        max_park=parse_duration(max_park) if max_park else None,
        params=parse_params(params),
        caps=frozenset(caps),
        tasks=TaskOptions(
            max_asks=max_asks,
            max_task_timeout=parse_duration(max_task_timeout),
            task_timeout=parse_duration(task_timeout),
        ),
    )
    with _results_destination(results_bucket):
        result = execute(plugins, request)
    sys.exit(int(result.exit_code))


def _results_address(value: str | None) -> str | None:
    """The shape check core can make (the plugin parses the rest at run start, before any turn)."""
    if value is not None and not value.startswith(("s3://", "file:///")):
        raise click.BadParameter(f"{value!r} is neither s3://bucket[/prefix] nor file:///abs/path")
    return value


@contextlib.contextmanager
def _results_destination(uri: str | None) -> Iterator[None]:
    """--results-bucket as the engine environment's RESULTS_ENV for this run, put back afterwards
    (the run flag's whole seam: the plugin that writes records reads the engine environment)."""
    if uri is None:
        yield
        return
    before = os.environ.get(RESULTS_ENV)
    os.environ[RESULTS_ENV] = uri
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(RESULTS_ENV, None)
        else:
            os.environ[RESULTS_ENV] = before
