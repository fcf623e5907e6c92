"""`crucible plan run` and `crucible plan show`: run a plan file, print an admitted graph.

Both are subcommands of core's `crucible plan` group, registered as "plan run" and "plan show".
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from crucible_core.api import UsageError, parse_duration

if TYPE_CHECKING:
    from crucible_core.api import Registry, TaskKindSpec, TaskRunner, ValidPlan

FORMATS = ("json", "toml", "dot", "mmd")


@click.command("run")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--cap", "caps", multiple=True, help="A capability this substrate provides (repeatable).")
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where the session log and captured files go (default: <plan dir>/state).",
)
@click.option(
    "--workspace",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    default=None,
    help="The directory tasks run in (default: the current directory).",
)
@click.option("--resume", is_flag=True, help="Continue a plan whose process was killed.")
@click.option(
    "--jobs",
    type=click.IntRange(1, 256),
    default=None,
    help="Tasks in flight at once (default: the number of CPUs).",
)
@click.option("--agent-cmd", default=None, help="A stand-in command that runs agent tasks.")
@click.option(
    "--max-time", default=None, help="Wall-clock ceiling (90s, 15m, 2h); attempts in flight are killed."
)
@click.option(
    "--deploy-profile",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    default=None,
    help="Run tasks needing what this machine lacks (gpu, ...) on the profile's cluster (docs/kubernetes.md).",
)
@click.option(
    "--ui",
    default="console",
    show_default=True,
    help="How progress is shown: any registered reporter (console, headless, jsonl, ...).",
)
def run(
    file: Path,
    caps: tuple[str, ...],
    state_dir: Path | None,
    workspace: Path | None,
    resume: bool,
    jobs: int | None,
    agent_cmd: str | None,
    max_time: str | None,
    deploy_profile: Path | None,
    ui: str,
) -> None:
    """Run a standalone plan: no World and no Judge, so engine tasks are refused.

    Exit 0 when every required task passed (or skipped), 3 when an operator or a signal stopped
    it, 4 when the plan did not reach a passing verdict, 10 when the plan file was refused, 11
    when the state dir already holds a run and --resume was not given.
    """
    from functools import partial

    from crucible_core.api import Budget, SessionRequest, TaskOptions, execute_session, load_plugins
    from crucible_lane_plan.lane import PlanFile, prepare_plan_file

    result = execute_session(
        load_plugins(),
        SessionRequest(
            prepare_lane=partial(prepare_plan_file, PlanFile(file, workspace, agent_cmd, deploy_profile)),
            budget=Budget(max_time=parse_duration(max_time) if max_time is not None else None),
            state_dir=state_dir,
            resume=resume,
            ui=ui,
            caps=frozenset(caps),
            tasks=TaskOptions(jobs=jobs),
        ),
    )
    if result.exit_code:
        raise SystemExit(int(result.exit_code))


@click.command("show")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, exists=True), required=False)
@click.option(
    "--manifest",
    "-m",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    default=None,
    help="Show the iteration graph a run of this manifest executes.",
)
@click.option(
    "--wide-round",
    is_flag=True,
    help="With --manifest: show the wide-round graph compiled from its [search] instead.",
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="json", show_default=True)
@click.option("--cap", "caps", multiple=True, help="A capability to assume when judging truncation.")
@click.option(
    "--deploy-profile",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    default=None,
    help="Count what the profile's task runners serve (offline: no cluster is contacted).",
)
def show(
    file: Path | None,
    manifest: Path | None,
    wide_round: bool,
    fmt: str,
    caps: tuple[str, ...],
    deploy_profile: Path | None,
) -> None:
    """Validate a plan without running it and print the admitted graph.

    The JSON form carries the verdict a run here would reach and, when task runners are
    configured (--deploy-profile, or the manifest's [deploy]), which tasks they would take.
    """
    from crucible_core.api import TaskRunnerContext, load_plugins, validate_plan
    from crucible_lane_plan import render
    from crucible_lane_plan.lane import open_runners

    if (file is None) == (manifest is None):
        raise UsageError("give a plan FILE or --manifest, not both and not neither")
    if wide_round and manifest is None:
        raise UsageError("--wide-round shows a manifest's wide round: give --manifest")
    plugins = load_plugins()
    kinds: Registry[TaskKindSpec] = plugins.registry("task kind")
    profile = deploy_profile.resolve() if deploy_profile is not None else None
    if manifest is not None:
        from crucible_core.api import effective_workflow, load_manifest, validate_document

        # a broken manifest is reported as such, not as a graph
        loaded = load_manifest(manifest, plugins=plugins)
        document = effective_workflow(plugins, loaded)
        if wide_round:
            from crucible_core.api import RunOptions, prepare_round

            search = prepare_round(plugins, loaded, RunOptions())
            if search is None:
                raise UsageError(f"{manifest} asks for no wide round ([search].wide is 0 or absent)")
            plan = search.graph()
        elif document is not None:
            plan = validate_document(plugins, document, source=str(manifest))
        else:
            plan = validate_plan(
                render.default_iteration_plan(), kinds, owns_world_and_judge=True, source=str(manifest)
            )
        deploy = loaded.deploy_settings
        base = loaded.dir
    else:
        assert file is not None
        from crucible_core.api import declared_services, plan_from_data, read_plan_file

        data = read_plan_file(file)
        declared_services(data, [file.resolve().parent], str(file))
        plan = validate_plan(plan_from_data(data, kinds, source=str(file)), kinds, source=str(file))
        deploy = None
        base = file.resolve().parent
    runners: tuple[TaskRunner, ...] = ()
    if profile is not None or deploy is not None:
        # Asked offline: the runners say what they would take; nothing is contacted or created.
        context = TaskRunnerContext(
            run_name=base.name,
            state_dir=base / "state",
            base_dir=base,
            deploy=deploy,
            deploy_profile=profile,
            env=dict(os.environ),
            offline=True,
        )
        runners = open_runners(plugins, context)
    try:
        verdict, runs_on = _truncation_verdict(plan, frozenset(caps), runners, kinds)
    finally:
        for runner in runners:
            runner.close()
    placed = runs_on if runners else None
    if fmt == "json":
        click.echo(render.to_json(plan, verdict, placed))
        return
    if placed is not None:  # the graph formats have no place for it: say it beside them
        click.echo(f"crucible: plan {verdict}", err=True)
    if fmt == "toml":
        click.echo(render.to_toml(plan), nl=False)
    elif fmt == "dot":
        click.echo(render.to_dot(plan), nl=False)
    else:
        click.echo(render.to_mermaid(plan), nl=False)


def _truncation_verdict(
    plan: ValidPlan, caps: frozenset[str], runners: tuple[TaskRunner, ...], kinds: Registry[TaskKindSpec]
) -> tuple[str, dict[str, str]]:
    """The verdict a run here would reach, and which runner takes each task this machine cannot run."""
    from crucible_core.api import Task, runner_for, task_refusals, unrunnable_tasks

    available = caps | {"any"} | {t.needs for t in plan.tasks if t.needs.startswith("service.")}

    def place(task: Task) -> TaskRunner | None:
        entry = kinds.entries.get(task.kind)  # a wide round's own kind is not in the registry
        return runner_for(task, entry.value, runners) if entry is not None else None

    unrunnable = unrunnable_tasks(plan, available, place)
    by_name = {task.name: task for task in plan.tasks}
    runs_on: dict[str, str] = {}
    missing: list[str] = []
    named: set[str] = set()  # required tasks the verdict names (their dependents are not repeated)
    for name in plan.order:
        task = by_name[name]
        runner = place(task) if task.needs not in available else None
        if name not in unrunnable:
            if runner is not None:
                runs_on[name] = runner.name
            continue
        if not task.required:
            continue
        if task.needs not in available and runner is None:
            entry = kinds.entries.get(task.kind)
            why = task_refusals(task, entry.value, runners) if entry is not None else []
            missing.append(f"{name} ({'; '.join(why)})" if why else name)
            named.add(name)
        elif not any(dep in named for dep in task.depends_on if dep in unrunnable):  # else its cause is named
            missing.append(f"{name} (depends on work that cannot run here)")
            named.add(name)
    if missing:
        return f"truncated: {', '.join(missing)} cannot run here", runs_on
    if runs_on:
        where = ", ".join(f"{name} on {runner}" for name, runner in runs_on.items())
        return f"runnable ({where})", runs_on
    return "runnable", runs_on
