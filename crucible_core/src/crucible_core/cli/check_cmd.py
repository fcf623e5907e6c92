"""`crucible check`: validate a manifest and prove its gate before any agent turn is spent."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from crucible_core.cli.options import manifest_option, manifest_or_pack, pack_option, repo_option
from crucible_core.errors import ExitCode

if TYPE_CHECKING:
    from crucible_core.manifest.loader import LoadedManifest
    from crucible_core.plan.ir import ValidPlan
    from crucible_core.plugins import Plugins
    from crucible_core.services.resolve import Resolution

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
    from crucible_core.contract.plain_text import plain
    from crucible_core.manifest.loader import load_manifest
    from crucible_core.plugins import load_plugins
    from crucible_core.run.check import check

    if plan_file is not None:
        _check_plan(plan_file)
        return
    plugins = load_plugins()
    for failure in plugins.failures:
        click.echo(f"WARN plugin {failure.name} ({failure.distribution}) failed to load: {failure.error}")
    if ui is not None:
        _check_ui(plugins, ui)
    if pack is not None:
        _check_pack_needs(plugins, pack, repo)
    manifest = manifest_or_pack(manifest, pack, repo, prepare=True, plugins=plugins)
    if _check_workflow(manifest, plugins):
        return
    loaded = load_manifest(manifest, plugins=plugins)
    findings = check(plugins, loaded, harness=harness, caps=frozenset(caps))
    for level, text in findings.lines:
        click.echo(f"{MARKS[level]} {plain(text)}")
    if findings.failed:
        click.echo("check failed")
        sys.exit(int(ExitCode.CHECK_FAILED))
    click.echo("check passed")


def _check_ui(plugins: Plugins, ui: str) -> None:
    """The reporter `--ui` names; a missing one fails here, naming the distribution that provides it."""
    from crucible_core.errors import PluginError

    try:
        entry = plugins.registry("reporter").entry(ui, where="--ui")
    except PluginError as exc:
        click.echo(f"{MARKS['fail']} {exc.render()}")
        click.echo("check failed")
        sys.exit(int(ExitCode.CHECK_FAILED))
    click.echo(f"{MARKS['ok']} --ui {ui}: reporter from {entry.plugin}")


def _check_pack_needs(plugins: Plugins, pack: str, repo: Path | None) -> None:
    """What the pack needs from the repository; a missing need fails here, before anything is copied."""
    from crucible_core import domain_pack

    lines = domain_pack.needs_report(
        plugins, domain_pack.find_pack(plugins, pack), repo.resolve() if repo else None
    )
    for level, text in lines:
        click.echo(f"{MARKS[level]} {text}")
    if any(level == "fail" for level, _ in lines):
        click.echo("check failed")
        sys.exit(int(ExitCode.CHECK_FAILED))


def _check_workflow(manifest: Path, plugins: Plugins) -> bool:
    """Compile and validate the manifest's workflow; True when it is a playbook (nothing else to prove)."""
    from crucible_core.cli.workflow_cmd import validate_document
    from crucible_core.manifest.loader import load_manifest
    from crucible_core.workflow.pack import effective_workflow

    loaded = load_manifest(manifest, plugins=plugins)
    document = effective_workflow(plugins, loaded)
    if document is None:
        if _check_services(loaded, None, plugins):  # agent turns would lose a service: the run is refused
            click.echo("check failed")
            sys.exit(int(ExitCode.CHECK_FAILED))
        return False
    plan = validate_document(plugins, document, source=str(manifest))
    click.echo(f"ok   workflow ({document['type']}) compiled and validated: {len(plan.tasks)} task(s)")
    failed = _check_services(loaded, plan, plugins)
    if document["type"] == "playbook":
        failed = _check_workspace_memory(plugins) or failed
        if failed:
            click.echo("check failed")
            sys.exit(int(ExitCode.CHECK_FAILED))
        click.echo("check passed")
        return True
    if failed:
        click.echo("check failed")
        sys.exit(int(ExitCode.CHECK_FAILED))
    return False


def _check_workspace_memory(plugins: Plugins) -> bool:
    """Whether a plugin keeps a playbook's workspace history; True (and why) when none does."""
    from crucible_core.errors import PluginError
    from crucible_core.lanes.playbook_workspace import memory_factory

    try:
        memory_factory(plugins)
    except PluginError as exc:
        click.echo(f"{MARKS['fail']} {exc.render()}")
        return True
    return False


def _check_services(loaded: LoadedManifest, plan: ValidPlan | None, plugins: Plugins) -> bool:
    """A manifest's [[service]] resolution; True when a required task or the agent turns lose one,
    or a service's transport has no plugin to serve it."""
    import os

    if not loaded.services:
        return False
    from crucible_core.services import run_services

    resolution = run_services.resolve_declared(loaded.services, os.environ)
    needed_by: dict[str, list[str]] = {}
    required: dict[str, bool] = {}
    for task in plan.tasks if plan is not None else ():
        needed_by.setdefault(task.needs, []).append(task.name)
        required[task.name] = plan.plan.task(task.name).required if plan is not None else True
    for name in loaded.manifest.agent.services:
        needed_by.setdefault(f"service.{name}", []).append("agent turns")
        required["agent turns"] = True  # a loop whose turns lose a service is refused outright
    return _print_services(resolution, needed_by, required, plugins)


def _print_services(
    resolution: Resolution, needed_by: dict[str, list[str]], required: dict[str, bool], plugins: Plugins
) -> bool:
    from crucible_core.services.resolve import describe, transport_problems

    for line in describe(resolution, needed_by):
        click.echo(f"{MARKS['info']} {line}")
    # The run refuses these before its log opens (exit 12), whichever task needs the service.
    unserved = transport_problems(resolution, plugins.registry("service transport").names())
    for line in unserved:
        click.echo(f"{MARKS['fail']} {line}")
    failed = bool(unserved)
    for capability, why in resolution.unavailable().items():
        for name in needed_by.get(capability, []):
            must = required.get(name, True)
            failed = failed or must
            if name == "agent turns":
                line = f"agent turns need {capability}: {why}; the run is refused"
            else:
                verdict = "truncates the plan" if must else "is skipped with its dependents"
                line = f"task {name} needs {capability}: {why}; it {verdict}"
            click.echo(f"{MARKS['fail' if must else 'warn']} {line}")
    return failed


def _check_plan(path: Path) -> None:
    """A plan file: the graph validates, and each declared service resolves (or why not, by name)."""
    import os

    from crucible_core.plan.load import plan_from_data, read_plan_file
    from crucible_core.plan.validate import validate
    from crucible_core.plugins import load_plugins
    from crucible_core.services import run_services

    plugins = load_plugins()
    kinds = plugins.registry("task kind")
    data = read_plan_file(path)
    declared = run_services.declarations_of(data, [path.resolve().parent, Path.cwd().resolve()], str(path))
    plan = validate(plan_from_data(data, kinds, source=str(path)), kinds, source=str(path))
    click.echo(f"ok   plan {path} admitted ({len(plan.tasks)} tasks)")
    resolution = run_services.resolve_declared(declared, os.environ)
    needed_by: dict[str, list[str]] = {}
    for task in plan.tasks:
        needed_by.setdefault(task.needs, []).append(task.name)
    failed = _print_services(
        resolution, needed_by, {t.name: plan.plan.task(t.name).required for t in plan.tasks}, plugins
    )
    if failed:
        click.echo("check failed")
        sys.exit(int(ExitCode.CHECK_FAILED))
    click.echo("check passed")
