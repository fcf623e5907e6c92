"""What `crucible check` finds about any manifest (loop, scored workflow, playbook, services) or a plan file.

The command and `api.check` both call `check_manifest`; the command prints each finding as it
is made, so the text and the exit codes are those of the command, and the library returns the
same findings. A check stops at the first part that fails outright (the reporter `--ui` names,
what a pack needs, a lost service), as a run would refuse there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from crucible_core.errors import PluginError
from crucible_core.run.check import Findings
from crucible_core.workflow.lanes import SCORED_WORKFLOW_TYPES

if TYPE_CHECKING:
    from crucible_core.manifest.loader import LoadedManifest
    from crucible_core.plan.ir import ValidPlan
    from crucible_core.plugins import Plugins
    from crucible_core.services.resolve import Resolution

OnFinding = Callable[[str, str], object]


def check_manifest(
    plugins: Plugins,
    manifest: Path,
    *,
    harness: str | None = None,
    caps: frozenset[str] = frozenset(),
    ui: str | None = None,
    pack: str | None = None,
    repo: Path | None = None,
    on_add: OnFinding | None = None,
) -> Findings:
    """Every finding about the manifest (with `pack`, the pack's copy in ./NAME, made or refreshed).

    A manifest that does not load raises its ManifestError, after the findings made before it.
    """
    from crucible_core.manifest.loader import load_manifest
    from crucible_core.run.check import check
    from crucible_core.workflow.pack import effective_workflow, validate_document

    findings = Findings(on_add=on_add)
    for failure in plugins.failures:
        findings.add(
            "warn", f"plugin {failure.name} ({failure.distribution}) failed to load: {failure.error}"
        )
    if ui is not None and not _ui_installed(plugins, ui, findings):
        return findings
    if pack is not None:
        if not _pack_needs_met(plugins, pack, repo, findings):
            return findings
        manifest = plugins.domain_packs().prepare(plugins, pack, repo)
    loaded = load_manifest(manifest, plugins=plugins)
    document = effective_workflow(plugins, loaded)
    if document is None:
        # agent turns that would lose a service: the run is refused
        if _services_served(loaded, None, plugins, findings):
            check(plugins, loaded, harness=harness, caps=caps, findings=findings)
        return findings
    plan = validate_document(plugins, document, source=str(manifest))
    findings.add("ok", f"workflow ({document['type']}) compiled and validated: {len(plan.tasks)} task(s)")
    served = _services_served(loaded, plan, plugins, findings)
    if document["type"] not in SCORED_WORKFLOW_TYPES:
        _lane(plugins, loaded, document["type"], findings)  # a plugin lane's graph is all there is to prove
    elif served:
        check(plugins, loaded, harness=harness, caps=caps, findings=findings)
    return findings


def check_plan(plugins: Plugins, path: Path, *, on_add: OnFinding | None = None) -> Findings:
    """A plan file: the graph validates, and each declared service resolves (or why not, by name)."""
    from crucible_core.plan.load import plan_from_data, read_plan_file
    from crucible_core.plan.validate import validate
    from crucible_core.services import run_services

    findings = Findings(on_add=on_add)
    kinds = plugins.registry("task kind")
    data = read_plan_file(path)
    declared = run_services.declarations_of(data, [path.resolve().parent, Path.cwd().resolve()], str(path))
    plan = validate(plan_from_data(data, kinds, source=str(path)), kinds, source=str(path))
    findings.add("ok", f"plan {path} admitted ({len(plan.tasks)} tasks)")
    resolution = run_services.resolve_declared(declared, os.environ)
    needed_by: dict[str, list[str]] = {}
    for task in plan.tasks:
        needed_by.setdefault(task.needs, []).append(task.name)
    required = {t.name: plan.plan.task(t.name).required for t in plan.tasks}
    _report_services(resolution, needed_by, required, plugins, findings)
    return findings


def _ui_installed(plugins: Plugins, ui: str, findings: Findings) -> bool:
    """The reporter `--ui` names; a missing one fails, naming the distribution that provides it."""
    try:
        entry = plugins.registry("reporter").entry(ui, where="--ui")
    except PluginError as exc:
        findings.add("fail", exc.render())
        return False
    findings.add("ok", f"--ui {ui}: reporter from {entry.plugin}")
    return True


def _pack_needs_met(plugins: Plugins, pack: str, repo: Path | None, findings: Findings) -> bool:
    """What the pack needs from the repository; a missing need fails before anything is copied."""
    lines = plugins.domain_packs().needs(plugins, pack, repo)
    for level, text in lines:
        findings.add(level, text)
    return not any(level == "fail" for level, _ in lines)


def _lane(plugins: Plugins, loaded: LoadedManifest, lane: str, findings: Findings) -> None:
    """The plugin lane the workflow type selects, and what it finds; a failure naming the
    distribution to install when no installed plugin registers it."""
    try:
        entry = plugins.registry("lane").entry(lane, where=f"{loaded.path} ([workflow].type)")
    except PluginError as exc:
        findings.add("fail", exc.render())
        return
    findings.add("ok", f"{lane} lane from {entry.plugin}")
    for level, text in entry.value.check(plugins, loaded):
        findings.add(level, text)


def _services_served(
    loaded: LoadedManifest, plan: ValidPlan | None, plugins: Plugins, findings: Findings
) -> bool:
    """A manifest's [[service]] resolution; False when a required task or the agent turns lose one,
    or a service's transport has no plugin to serve it."""
    if not loaded.services:
        return True
    from crucible_core.services import run_services

    resolution = run_services.resolve_declared(loaded.services, os.environ)
    needed_by: dict[str, list[str]] = {}
    required: dict[str, bool] = {}
    if plan is not None:
        for task in plan.tasks:
            needed_by.setdefault(task.needs, []).append(task.name)
            required[task.name] = plan.plan.task(task.name).required
    for name in loaded.manifest.agent.services:
        needed_by.setdefault(f"service.{name}", []).append("agent turns")
        required["agent turns"] = True  # a loop whose turns lose a service is refused outright
    return not _report_services(resolution, needed_by, required, plugins, findings)


def _report_services(
    resolution: Resolution,
    needed_by: dict[str, list[str]],
    required: dict[str, bool],
    plugins: Plugins,
    findings: Findings,
) -> bool:
    """The resolution, task by task; True when something the run needs is lost."""
    from crucible_core.services.resolve import describe, transport_problems

    for line in describe(resolution, needed_by):
        findings.add("info", line)
    # The run refuses these before its log opens (exit 12), whichever task needs the service.
    unserved = transport_problems(resolution, plugins.registry("service transport").names())
    for line in unserved:
        findings.add("fail", line)
    failed = bool(unserved)
    _name_missing_providers(resolution, plugins, findings)
    for capability, why in resolution.unavailable().items():
        for name in needed_by.get(capability, []):
            must = required.get(name, True)
            failed = failed or must
            if name == "agent turns":
                line = f"agent turns need {capability}: {why}; the run is refused"
            else:
                verdict = "truncates the plan" if must else "is skipped with its dependents"
                line = f"task {name} needs {capability}: {why}; it {verdict}"
            findings.add("fail" if must else "warn", line)
    return failed


def _name_missing_providers(resolution: Resolution, plugins: Plugins, findings: Findings) -> None:
    """For a tool the catalog does not attest and no installed plugin offers, the standard
    distribution that offers it (`crucible services catalog` attests it once installed)."""
    from crucible_core.registry import provider_of

    offered = plugins.registry("service").names()
    for service in resolution.services:
        tool = service.declaration.tool
        provider = provider_of("service", tool)
        if service.entry is None and provider is not None and tool not in offered:
            findings.add(
                "info",
                f"service {service.name}: no installed plugin offers tool {tool!r}: `pip install "
                f"{provider}` provides it, then `crucible services catalog` attests it",
            )
