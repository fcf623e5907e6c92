"""`crucible check`: validate a manifest and prove its gate before any agent turn is spent."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from crucible_core.cli.options import manifest_option
from crucible_core.errors import ExitCode

MARKS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "info": "    "}


@click.command("check")
@manifest_option
@click.option("--harness", default=None, help="Check with this harness instead of [agent].harness.")
def command(manifest: Path, harness: str | None) -> None:
    """Validate a manifest and its gate without an agent turn.

    Parses the manifest (unknown keys fail), resolves every referenced file and plugin name,
    measures once through the chosen judge (for the command judge: runs measure_cmd and proves
    the contract shape), runs [judge.selftest] when declared, and warns when the
    gate is reachable by the agent's edits. When the workspace does not exist yet it is set
    up for the check and removed afterwards. Exit 0 when nothing failed (warnings never
    fail), 13 when something did (a measure that gives no valid reading fails), 10 for a
    manifest that does not load, 16 for one this version does not support.
    """
    from crucible_core.contract.measure_diagnosis import printable
    from crucible_core.plugins import load_plugins
    from crucible_core.run.check import check
    from crucible_core.run.runner import load_for_run

    plugins = load_plugins()
    for failure in plugins.failures:
        click.echo(f"WARN plugin {failure.name} ({failure.distribution}) failed to load: {failure.error}")
    if _check_workflow(manifest):
        return
    loaded = load_for_run(plugins, manifest)
    findings = check(plugins, loaded, harness=harness)
    for level, text in findings.lines:
        click.echo(f"{MARKS[level]} {printable(text)}")
    if findings.failed:
        click.echo("check failed")
        sys.exit(int(ExitCode.CHECK_FAILED))
    click.echo("check passed")


def _check_workflow(manifest: Path) -> bool:
    """Compile and validate the manifest's workflow; True when it is a playbook (nothing else to prove)."""
    from crucible_core.cli.workflow_cmd import validate_document
    from crucible_core.manifest.loader import load_manifest
    from crucible_core.workflow.pack import effective_workflow

    loaded = load_manifest(manifest)
    document = effective_workflow(loaded)
    if document is None:
        return False
    plan = validate_document(document, source=str(manifest))
    click.echo(f"ok   workflow ({document['type']}) compiled and validated: {len(plan.tasks)} task(s)")
    if document["type"] == "playbook":
        click.echo("check passed")
        return True
    return False
