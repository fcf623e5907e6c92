"""Stage 4 of `crucible scope`: the RunIdentity digest a run of the pack will report, and SCOPE.md.

The digest is computed the way a fresh run computes it: the workspace is set up as the run sets
it up (setup_cmd or the clone, then the injects), the world makes its base commit, and
`run_identity` covers that base, the manifest, the injects and the judge. The git world's base
commit depends on its tree and parent only, so the run that follows finds the same one. The
workspace is removed afterwards: a fresh run refuses one it did not create.

`render` is a pure function of what the stages found; the command writes its text.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from crucible_core.api import LoadedManifest, Plugins, wire

from crucible_core.api import WorkspaceError

PENDING = (
    ("S2", "propose", "one agent turn drafts the harness: manifest, gate, workload, baseline, controls"),
    (
        "S3",
        "preflight",
        "the isolation preflight: the target's own share of the gated metric must be material",
    ),
    ("S4", "approval", "the pack opens as a draft PR and a human signs off before any budget is spent"),
)
MAX_CHECK_LINES = 60
MAX_CHECK_LINE = 400


@attrs.frozen
class Frozen:
    identity: wire.RunIdentity
    base_commit: str
    caveats: tuple[str, ...]  # what may still move the digest a run reports


def frozen_identity(plugins: Plugins, loaded: LoadedManifest) -> Frozen:
    """The identity a fresh `crucible run` of this manifest records at its start."""
    from crucible_core.api import (
        RunPaths,
        Shell,
        build_drivers,
        engine_environment,
        prepare_workspace,
        run_identity,
        workspace_in_use,
    )

    caveats: list[str] = []
    paths = RunPaths.resolve(loaded)
    if loaded.inside_workspace():
        # Setting it up would commit in the user's own checkout: the first run settles the base.
        base = ""
        caveats.append(
            "the manifest lives inside its workspace: the base commit is the one the first run "
            "makes there, so that run's identity line names the final digest"
        )
    else:
        if workspace_in_use(paths.workspace):
            raise WorkspaceError(
                f"the pack's workspace {paths.workspace} already exists: scope freezes a pack before its first run",
                hint="move the workspace (and state directory) away, or read the identity line of the run that made it",
            )
        shell = Shell(cwd=paths.workspace, env=engine_environment())
        try:
            drivers = build_drivers(plugins, loaded, paths, shell, world_record=False)
            base = prepare_workspace(loaded, paths, drivers.world, shell)
        finally:
            shutil.rmtree(paths.workspace, ignore_errors=True)
    if loaded.services:
        caveats.append("the run adds one digest per resolved [[service]] when it starts")
    packs = plugins.hook.crucible_domain_packs()
    provenance = packs.provenance(loaded.dir) if packs is not None else None
    identity = run_identity(loaded, base, None, provenance=provenance)
    return Frozen(identity, base, tuple(caveats))


def _line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_CHECK_LINE else text[: MAX_CHECK_LINE - 3] + "..."


def render(
    *,
    pack: str,
    goal_source: str,
    goal_url: str,
    goal_framing: str,
    check_lines: Sequence[tuple[str, str]],
    workflow_sha256: str,
    task_order: Sequence[str],
    frozen: Frozen,
    frozen_at: str,
) -> str:
    """SCOPE.md: the goal, the check, the workflow picture, the identity, and what is still pending."""
    identity = frozen.identity
    counts = {level: sum(1 for lv, _ in check_lines if lv == level) for level in ("ok", "warn", "fail")}
    out = [
        f"# Scope of {pack}",
        "",
        f"Frozen by `crucible scope` at {frozen_at} (ADR-0014 S0 and S1: ingest, check, render, freeze).",
        "A run of this pack reports the digest below on its identity line; a different digest means",
        "the pack, its gate or its base moved after this freeze.",
        "",
        "## Goal",
        "",
        f"Source: {goal_source}" + (f" ({goal_url})" if goal_url else ""),
        "",
        goal_framing.rstrip(),
        "",
        "## Check",
        "",
        f"Outcome: passed ({counts['ok']} ok, {counts['warn']} warnings); `[judge.selftest]` runs "
        "here when the manifest declares it.",
        "",
    ]
    shown = list(check_lines)[:MAX_CHECK_LINES]
    out += [f"- {level}: {_line(text)}" for level, text in shown]
    if len(check_lines) > len(shown):
        out.append(f"- ... {len(check_lines) - len(shown)} more lines")
    out += [
        "",
        "## Workflow",
        "",
        "WORKFLOW.png and WORKFLOW.svg beside this file show the graph each iteration executes, as",
        "the engine admitted it. They are written by `crucible scope`, not by an agent; the PNG's",
        f"sha256 is `{workflow_sha256}`.",
        "",
        "Task order: " + " -> ".join(f"`{name}`" for name in task_order),
        "",
        "## RunIdentity",
        "",
        f"- digest: `{identity.digest}`",
        f"- manifest_hash: `{identity.manifest_hash}`",
        f"- inject_hash: `{identity.inject_hash}`",
        f"- measure_cmd: `{identity.measure_cmd}`",
        f"- direction: `{identity.direction}`",
    ]
    for component in identity.components:
        name = component.name or "(the domain)"
        out.append(
            f"- component {name}: repo `{component.repo}`, base `{component.base_sha or 'not yet made'}`"
        )
    out += [f"- note: {caveat}" for caveat in frozen.caveats]
    out += ["", "## Pending (ADR-0014)", ""]
    out += [f"- {stage} {name}: pending ({what})" for stage, name, what in PENDING]
    return "\n".join(out) + "\n"
