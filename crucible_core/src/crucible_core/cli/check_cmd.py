"""`crucible check`: validate a manifest and prove its gate before any agent turn is spent."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from crucible_core.cli.options import manifest_option, manifest_or_pack, pack_option, repo_option
from crucible_core.errors import ExitCode

MARKS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "info": "    "}


@click.command("check")
@manifest_option
@pack_option
@repo_option
@click.option("--harness", default=None, help="Check with this harness instead of [agent].harness.")
@click.option(
    "--cap",
    "caps",
    multiple=True,
    help="A capability this machine provides (repeatable), as the run will declare it: a judge or "
    "wide-round proposals that need it run here.",
)
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    default=None,
    help="Check a plan file instead: its graph, and its [[service]] resolution against the catalog.",
)
@click.option(
    "--ui",
    default=None,
    help="Check that this reporter is installed, as `crucible run --ui` will ask for it.",
)
def command(
    manifest: Path,
    pack: str | None,
    repo: Path | None,
    harness: str | None,
    caps: tuple[str, ...],
    plan_file: Path | None,
    ui: str | None,
) -> None:
    """Validate a manifest and its gate without an agent turn.

    Parses the manifest (unknown keys fail), resolves every referenced file and plugin name,
    measures once through the chosen judge (for the command judge: runs measure_cmd and proves
    the contract shape), runs [judge.selftest] when declared, and warns when the
    gate is reachable by the agent's edits. When the workspace does not exist yet it is set
    up for the check and removed afterwards. Exit 0 when nothing failed (warnings never
    fail), 13 when something did (a measure that gives no valid reading fails), 10 for a
    manifest that does not load, 16 for one this version does not support.

    With --pack NAME (and --repo PATH): first what the pack needs from the repository (files,
    a setup command, params), then the usual checks on the pack's copy in ./NAME. With --ui NAME,
    first whether that reporter is installed (`--ui rich` needs crucible-plugin-console-rich).
    """
    from crucible_core.plugins import load_plugins
    from crucible_core.session.check import check_manifest, check_plan

    plugins = load_plugins()
    if plan_file is not None:
        findings = check_plan(plugins, plan_file, on_add=_print)
    else:
        if pack is None:
            manifest_or_pack(manifest, pack, repo, prepare=True)  # --repo without --pack is refused
        findings = check_manifest(
            plugins,
            manifest,
            harness=harness,
            caps=frozenset(caps),
            ui=ui,
            pack=pack,
            repo=repo,
            on_add=_print,
        )
    if findings.failed:
        click.echo("check failed")
        sys.exit(int(ExitCode.CHECK_FAILED))
    click.echo("check passed")


def _print(level: str, text: str) -> None:
    from crucible_core.contract.plain_text import plain

    click.echo(f"{MARKS[level]} {plain(text)}")
