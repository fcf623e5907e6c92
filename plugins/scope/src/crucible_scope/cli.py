"""`crucible scope --pack DIR`: ingest, check, render, freeze, stopping at the first stage that fails.

Each stage's failure is a typed error with its own exit code (docs/cli.md, "crucible scope"):
ingest 64 (a bad --issue or --goal-file) or 15 (the forge), or 10 (the pack's own goal is
absent, or the pack does not load to state one);
check 10 (the manifest does not load) or 13 (check found problems); render 10 (the graph is
refused); freeze 11 (SCOPE.md exists without --force, or the pack's workspace already exists).
With --json the summary is printed whatever the outcome, and the exit code is the same.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import click

from crucible_core.api import CrucibleError, ExitCode, UsageError, WorkspaceError

if TYPE_CHECKING:
    from crucible_core.api import LoadedManifest, Plugins, ValidPlan
    from crucible_scope.goal import Goal

MANIFEST_NAME = "crucible.toml"
SCOPE_NAME = "SCOPE.md"
PNG_NAME = "WORKFLOW.png"
SVG_NAME = "WORKFLOW.svg"
STAGES = ("ingest", "check", "render", "freeze")


class CheckStageFailed(CrucibleError):
    """`crucible check` found problems: the pack is not frozen."""

    exit_code = ExitCode.CHECK_FAILED


@attrs.define
class Summary:
    """What --json prints: each stage's outcome, and what the freeze wrote."""

    pack: str
    stages: list[dict[str, Any]] = attrs.field(factory=list)
    goal_source: str = ""
    digest: str = ""
    files: list[str] = attrs.field(factory=list)
    exit_code: int = 0

    def passed(self, stage: str, detail: str) -> None:
        self.stages.append({"stage": stage, "status": "ok", "detail": detail})

    def failed(self, stage: str, error: CrucibleError) -> None:
        self.stages.append({"stage": stage, "status": "failed", "detail": error.message})
        self.stages += [{"stage": s, "status": "skipped"} for s in STAGES[STAGES.index(stage) + 1 :]]
        self.exit_code = int(error.exit_code)

    def document(self) -> dict[str, Any]:
        return {
            "pack": self.pack,
            "stages": self.stages,
            "goal_source": self.goal_source,
            "digest": self.digest or None,
            "files": self.files,
            "pending": ["S2 propose", "S3 preflight", "S4 approval"],
            "exit_code": self.exit_code,
        }


@click.command("scope")
@click.option(
    "--pack",
    "pack",
    required=True,
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="The domain pack's directory (its crucible.toml); SCOPE.md and WORKFLOW.png are written there.",
)
@click.option("--issue", default=None, help="Take the goal from this GitHub issue: owner/repo#N.")
@click.option(
    "--goal-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Take the goal from this file (default: the pack's own [agent].goal or goal_file).",
)
@click.option("--force", is_flag=True, help="Replace an existing SCOPE.md.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary of every stage.")
def scope(pack: Path, issue: str | None, goal_file: Path | None, force: bool, as_json: bool) -> None:
    """Freeze a hand-written domain pack (ADR-0014 S0 and S1): ingest the goal, run `crucible check`
    on the pack (with its [judge.selftest]), draw WORKFLOW.png and WORKFLOW.svg, and write SCOPE.md
    with the RunIdentity digest a later `crucible run` reports. S2 to S4 are listed as pending.

    Exit 0 when SCOPE.md is written; 64 for a bad --issue or --goal-file; 15 when the forge
    cannot be read; 10 when the pack states no goal, does not load or its graph is refused; 13
    when check finds problems; 11 when SCOPE.md exists (without --force) or the pack's workspace does.
    """
    pack = pack.resolve()
    summary = Summary(pack=str(pack))
    stage = "ingest"
    try:
        if issue is not None and goal_file is not None:
            raise UsageError("give --issue or --goal-file, not both", hint="the goal has one source")
        manifest = pack / MANIFEST_NAME
        if not manifest.is_file():
            raise UsageError(f"{pack} holds no {MANIFEST_NAME}", hint="pass the directory of a domain pack")
        if (pack / SCOPE_NAME).exists() and not force:
            stage = "freeze"  # refused before anything is spent: nothing would be written
            raise WorkspaceError(
                f"{pack / SCOPE_NAME} already exists: the pack was frozen before",
                hint="pass --force to scope it again and replace SCOPE.md",
            )
        goal = _ingest(issue, goal_file, manifest)
        summary.goal_source = goal.source
        summary.passed("ingest", goal.source)

        stage = "check"
        plugins, loaded = _load(manifest)
        check_lines = _check(plugins, manifest)
        warnings = sum(1 for level, _ in check_lines if level == "warn")
        summary.passed("check", f"passed with {warnings} warnings" if warnings else "passed")

        stage = "render"
        plan = admitted_graph(plugins, loaded)
        png_sha = _render(pack, plan)
        summary.files += [str(pack / PNG_NAME), str(pack / SVG_NAME)]
        summary.passed("render", f"{len(plan.tasks)} tasks")

        stage = "freeze"
        from crucible_scope import freeze

        frozen = freeze.frozen_identity(plugins, loaded)
        text = freeze.render(
            pack=pack.name,
            goal_source=goal.source,
            goal_url=goal.url,
            goal_framing=goal.framing,
            check_lines=check_lines,
            workflow_sha256=png_sha,
            task_order=list(plan.order),
            frozen=frozen,
            frozen_at=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
        _write(pack / SCOPE_NAME, _without_secrets(text).encode("utf-8"))
        summary.digest = frozen.identity.digest
        summary.files.append(str(pack / SCOPE_NAME))
        summary.passed("freeze", f"digest {frozen.identity.digest}")
    except CrucibleError as exc:
        summary.failed(stage, exc)
        if not as_json:
            raise
        click.echo(json.dumps(summary.document(), indent=2))
        raise SystemExit(summary.exit_code) from None
    if as_json:
        click.echo(json.dumps(summary.document(), indent=2))
    else:
        click.echo(f"crucible scope: froze {pack / SCOPE_NAME} (digest {summary.digest})")
        click.echo("  pending: S2 propose, S3 preflight, S4 approval (ADR-0014)")


def _load(manifest: Path) -> tuple[Plugins, LoadedManifest]:
    from crucible_core.api import load_manifest, load_plugins

    plugins = load_plugins()
    return plugins, load_manifest(manifest, plugins=plugins)


def _ingest(issue: str | None, goal_file: Path | None, manifest: Path) -> Goal:
    from crucible_scope import goal

    if issue is not None:
        return goal.from_issue(goal.parse_issue_ref(issue), os.environ)
    if goal_file is not None:
        return goal.from_file(goal_file)
    _, loaded = _load(manifest)  # the goal the run will read: a pack that does not load has none
    return goal.from_pack(loaded.goal_text(), manifest)


def _check(plugins: Plugins, manifest: Path) -> list[tuple[str, str]]:
    """`crucible check` as a library call; its failing lines become the stage's error."""
    from crucible_core.api import check

    report = check(manifest, plugins=plugins)
    if report.failed:
        failures = [text for level, text in report.lines if level == "fail"]
        raise CheckStageFailed(
            f"crucible check found {len(failures)} problem(s): " + "; ".join(failures[:3]),
            hint=f"run `crucible check --manifest {manifest}` for every finding, fix them, and scope again",
        )
    return list(report.lines)


def admitted_graph(plugins: Plugins, loaded: LoadedManifest) -> ValidPlan:
    """The graph each iteration of a run executes, admitted as `crucible plan show --manifest` admits it."""
    from crucible_core.api import effective_workflow, iteration_plan, validate_document, validate_plan

    document = effective_workflow(plugins, loaded)
    if document is not None:
        return validate_document(plugins, document, source=str(loaded.path))
    return validate_plan(
        iteration_plan(), plugins.registry("task kind"), owns_world_and_judge=True, source=str(loaded.path)
    )


def _render(pack: Path, plan: ValidPlan) -> str:
    """WORKFLOW.svg and WORKFLOW.png in the pack; returns the PNG's sha256."""
    from crucible_scope import draw
    from crucible_scope.layout import lay_out

    layout = lay_out(plan)
    title = f"{pack.name}: the graph each iteration executes"
    png = draw.to_png(layout, title)
    _write(pack / SVG_NAME, draw.to_svg(layout, title).encode("utf-8"))
    _write(pack / PNG_NAME, png)
    return hashlib.sha256(png).hexdigest()


def _write(path: Path, data: bytes) -> None:
    """Atomically, replacing whatever stood there (a link planted there is replaced, never followed)."""
    from crucible_core.api import write_atomic

    write_atomic(path, data, 0o444)


def _without_secrets(text: str) -> str:
    """The forge token, were an issue to quote it back, never reaches SCOPE.md."""
    from crucible_scope.goal import TOKEN_ENVS

    for name in TOKEN_ENVS:
        secret = os.environ.get(name, "")
        if len(secret) >= 8:
            text = text.replace(secret, "[redacted]")
    return text
