"""The plan-file lane: `crucible plan run FILE`, a standalone work graph with no World and no Judge.

A plan file has no manifest: its tasks run in `--workspace` (default: the current directory),
its state goes to `--state-dir` (default: <plan dir>/state), and hooks see `RunContext.manifest`
as None. It writes no start line and no summary (readers know a plan file's log by that); the
session gives it the rest: redaction, reporters, hooks, the bridge, signals, services, shutdown.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from crucible_core.api import (
    Ending,
    ExecutorConfig,
    GraphLane,
    HeldEvents,
    LaneShell,
    PlannedServices,
    RunPaths,
    TaskRunner,
    TaskRunnerContext,
    UsageError,
    check_same_plan,
    declared_services,
    ended_report,
    open_task_runners,
    plan_from_data,
    plan_services,
    print_tasks,
    read_plan_file,
    recorded_run,
    report_ending,
    stable_run_id,
    tell_how_to_start_anew,
    validate_plan,
)

if TYPE_CHECKING:
    from crucible_core.api import (
        LoadedManifest,
        Plugins,
        PriorRun,
        Registry,
        SessionRequest,
        TaskKindSpec,
        ir,
        wire,
    )


@attrs.frozen
class PlanFile:
    """What `crucible plan run` hands its lane besides the session request: the file, and where its tasks run."""

    path: Path
    workspace: Path | None = None  # the directory its tasks run in (default: the current one)
    agent_cmd: str | None = None  # a stand-in command for its agent tasks
    deploy_profile: Path | None = None  # where its tasks needing what this machine lacks run


def prepare_plan_file(
    asked: PlanFile, plugins: Plugins, request: SessionRequest, take_lock: Callable[[Path], object]
) -> PlanFileLane | Ending:
    """Resolve a plan file before its log opens: the graph, the recorded run, services, runners."""
    file, tasks = asked.path, request.tasks
    kinds: Registry[TaskKindSpec] = plugins.registry("task kind")
    data = read_plan_file(file)
    root = (asked.workspace or Path.cwd()).resolve()
    # Services are refused before the graph compiles; args may not point into the plan's or the workspace's tree.
    declared = declared_services(data, [file.resolve().parent, root], str(file))
    plan = validate_plan(plan_from_data(data, kinds, source=str(file)), kinds, source=str(file))
    plugins.registry("reporter").get(request.ui, where="--ui")
    base = file.resolve().parent
    state = (request.state_dir or base / "state").resolve()
    paths = RunPaths(manifest_dir=base, workspace=root, state_dir=state, steer_file=base / "STEER.md")
    take_lock(state)
    prior = recorded_run(paths.session_log, resume=request.resume, what="plan")
    config = ExecutorConfig(workspace=root, state_dir=state, caps=request.caps, agent_cmd=asked.agent_cmd)
    config.max_seconds = request.budget.max_time
    config.max_asks = tasks.max_asks
    if tasks.jobs is not None:
        config.jobs = tasks.jobs
    if prior is not None and prior.admitted is not None:
        check_same_plan(plan, prior)
        report = ended_report(plan, kinds, config, prior)
        if report is not None:
            print_tasks(plan.order, report, aligned=True)
            print(f"plan {report.verdict}: already finished (spent ${report.spent_usd:.4f})")
            tell_how_to_start_anew(state, report.outcome)
            return Ending(report.outcome, "already finished", report_ending(report).exit_code)
    # Read the catalog before the log opens: a broken catalog is refused with nothing recorded.
    planned = plan_services(
        declared,
        os.environ,
        log_path=paths.session_log,
        resumed=prior is not None,
        plugins=plugins,
    )
    config.env = planned.task_env(os.environ)  # a service's secrets reach only that service
    held = HeldEvents()  # what the runners say while opening, written once the log is open
    runners = _task_runners(plugins, file, state, asked.deploy_profile, config.env, held)
    config.task_runners = runners
    return PlanFileLane(
        paths=paths,
        plan=plan,
        kinds=kinds,
        config=config,
        prior=prior,
        planned=planned,
        held=held,
        runners=runners,
        resumed=request.resume,
    )


class PlanFileLane(GraphLane):
    kind = "plan"

    def __init__(
        self,
        *,
        paths: RunPaths,
        plan: ir.ValidPlan,
        kinds: Registry[TaskKindSpec],
        config: ExecutorConfig,
        prior: PriorRun | None,
        planned: PlannedServices,
        held: HeldEvents,
        runners: tuple[TaskRunner, ...],
        resumed: bool,
    ) -> None:
        super().__init__()
        self.paths = paths
        self.manifest: LoadedManifest | None = None  # a plan file has none
        self.plan = plan
        self.kinds = kinds
        self.config = config
        self.prior = prior
        self.planned = planned
        self.agent_env: dict[str, str] = {}
        self.engine_env = dict(config.env)
        self.held = held
        self.task_runners = runners
        self.resumed = resumed
        self.run_id = stable_run_id(paths.state_dir)
        self.reporter_total: int | None = None

    def open(self, session: LaneShell) -> None:
        self.attach(session)

    def before_start(self) -> None:
        return None

    def start(self) -> None:
        assert self.session is not None
        self.held.release(self.session.log.emit)  # what the task runners said while opening

    def run(self) -> Ending:
        assert self.session is not None
        lifecycle = self.session.lifecycle(None, None)
        lifecycle.run_start()
        if self.resumed:
            self.supersede_owed()
        self.config.services = self.session.services
        report = self.execute(self.plan, self.kinds, self.config, self.prior)
        print_tasks(self.plan.order, report, aligned=True)
        print(f"plan {report.verdict}: {report.reason} (spent ${report.spent_usd:.4f})")
        return report_ending(report)

    def closing_events(self, ending: Ending) -> list[wire.Event]:
        return []  # a plan file writes no summary


def _task_runners(
    plugins: Plugins,
    file: Path,
    state: Path,
    profile: Path | None,
    env: dict[str, str],
    held: HeldEvents,
) -> tuple[TaskRunner, ...]:
    """The task runners --deploy-profile configures (none without one); a profile nobody takes is refused."""
    if profile is None:
        return ()
    context = TaskRunnerContext(
        run_name=file.resolve().parent.name,
        state_dir=state,
        base_dir=file.resolve().parent,
        deploy_profile=profile.resolve(),
        env=env,
        emit=held,
    )
    return open_runners(plugins, context)


def open_runners(plugins: Plugins, context: TaskRunnerContext) -> tuple[TaskRunner, ...]:
    """The task runners the context configures; a --deploy-profile nobody takes is refused."""
    runners = open_task_runners(plugins, context)
    if not runners and context.deploy_profile is not None:
        raise UsageError(
            f"--deploy-profile {context.deploy_profile}: no installed plugin runs tasks from a deploy profile",
            hint="install crucible-plugin-deploy-kubernetes",
        )
    return runners
