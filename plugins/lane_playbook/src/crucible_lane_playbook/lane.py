"""The playbook lane: one pass of a manifest's graph under a cost and a wall-clock ceiling.

No World, no Judge, no engine operations. Each settled task writes one task_result row
(score null); the run exits 0 iff its verdict is valid. The workspace starts as the loop's does
([repo] at its ref, or [workspace].setup_cmd, or each component of a composite; workspace.py)
and a passing task's changes become a commit of the run's workspace memory (the git world
plugin's; one per component of a composite). A resume folds
settled tasks from the log, never re-dispatches them, and rebuilds the workspace from the
pristine start plus the declared files of every folded task that passed in the shared
workspace, each committed as that task's.

With [publish], the forge's publisher is built before the log opens and the lifecycle gets a
broker that only mediates (open_mediation: no tool granted, no server started), so the draft
pull request crucible-plugin-publish-github opens at the run's end, when the workspace gained
commits beyond its base, is admitted like a loop's; the forge token is kept out of every task.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crucible_core.api import (
    ARTIFACT_NAME,
    FILES_DIR_NAME,
    AgentTurns,
    Ending,
    ExecutorConfig,
    FileStore,
    GraphLane,
    HeldEvents,
    Isolation,
    ResumeConflict,
    RunPaths,
    Shell,
    UnsupportedSectionError,
    UsageError,
    build_drivers,
    build_publisher,
    check_same_plan,
    copy_injects,
    declaration_for,
    effective_workflow,
    ended_report,
    engine_credentials,
    engine_environment,
    open_configured_runners,
    open_mediation,
    plan_data,
    plan_from_data,
    plan_services,
    print_tasks,
    read_events,
    recorded_run,
    refresh_frozen,
    report_ending,
    run_identity,
    stable_run_id,
    tell_how_to_start_anew,
    to_toml,
    validate_plan,
    wire,
)
from crucible_lane_playbook.workspace import (
    fresh_workspace,
    rebuild_workspace,
    refuse_existing_workspace,
    refuse_unsupported_repo,
    replay_declared_files,
    workspace_memory,
)

if TYPE_CHECKING:
    from crucible_core.api import (
        AgentBackend,
        Declaration,
        Disclosure,
        LaneContext,
        LaneShell,
        Lifecycle,
        LoadedManifest,
        PlannedServices,
        Plugins,
        PriorRun,
        Publisher,
        Registry,
        SessionRequest,
        TaskKindSpec,
        TaskRunner,
        TurnBroker,
        ValidPlan,
        WorkspaceMemory,
    )

MEMORY_DIR = "playbook-git"  # under the private dir: the engine's record of its git memory


def prepare_playbook(context: LaneContext) -> PlaybookLane | Ending:
    """Resolve a playbook before its log opens: the ceilings, the compiled graph, the sections a
    playbook does not act on (refused by name), the recorded run, the services, the task runners."""
    plugins, request, loaded = context.plugins, context.request, context.loaded
    budget, tasks = request.budget, request.tasks
    if budget.iterations is not None and budget.iterations > 1:
        raise UsageError("a playbook runs its graph exactly once; --iterations must be 1 or omitted")
    if not budget.max_cost or budget.max_cost <= 0 or not budget.max_time or budget.max_time <= 0:
        raise UsageError(
            "a playbook needs both ceilings before anything runs: --max-cost USD and --max-time DURATION",
            hint="for example: crucible run --manifest crucible.toml --max-cost 2 --max-time 30m",
        )
    published = [c.name for c in loaded.components if c.loaded.manifest.publish is not None]
    if published or (loaded.components and loaded.manifest.publish is not None):
        # C-PLAYBOOK-COMPOSITE has a component with a target publish a draft pull request when it
        # gained commits; refused by name rather than left unpublished without a word.
        named = f"component(s) {', '.join(published)}" if published else "the composite"
        raise UnsupportedSectionError(
            f"{loaded.path}: the [publish] of {named} is not supported on a composite playbook by "
            "this version: nothing would open their draft pull requests",
            hint="run the playbook over a copy of the domain without [publish]",
        )
    refuse_unsupported_repo(loaded)
    refuse_loop_sections(loaded)
    # The capability disclosure, resolved as the loop's is: env a plugin adds to an agent task's
    # turn must be covered by it, as it must for the loop's turns.
    declaration = declaration_for(plugins, loaded)
    disclosure = declaration.capabilities
    # [publish]: the forge's publisher, resolved now so a forge or a broker nobody installed is
    # refused by name before anything runs; the playbook's end publishes its commits through it.
    section = loaded.manifest.publish
    publisher = build_publisher(plugins, section) if section is not None else None
    document = effective_workflow(plugins, loaded, request.params)
    assert document is not None  # the manifest declares a playbook, so it has a graph
    kinds: Registry[TaskKindSpec] = plugins.registry("task kind")
    if tasks.task_timeout > tasks.max_task_timeout:
        raise UsageError("--task-timeout must not exceed --max-task-timeout")
    document = {**document, "task": [{"timeout": tasks.task_timeout, **task} for task in document["task"]]}
    plan = validate_plan(
        plan_from_data(plan_data(document, budget.max_cost), kinds, source=str(loaded.path)),
        kinds,
        source=str(loaded.path),
    )
    too_long = [t.name for t in plan.tasks if t.timeout > tasks.max_task_timeout]
    if too_long:
        raise UsageError(
            f"task(s) {', '.join(too_long)} declare a timeout over the operator's maximum of "
            f"{tasks.max_task_timeout:g}s (--max-task-timeout)"
        )
    plugins.registry("reporter").get(request.ui, where="--ui")
    paths = RunPaths.resolve(loaded, state_dir=request.state_dir)
    memory = workspace_memory(plugins, loaded, paths.workspace, paths.private_dir / MEMORY_DIR)
    context.take_lock(paths.state_dir)
    artifact = to_toml(document)
    prior = recorded_run(paths.session_log, resume=request.resume, what="playbook")
    config = ExecutorConfig(
        workspace=paths.workspace,
        state_dir=paths.state_dir,
        caps=request.caps,
        max_seconds=budget.max_time,
        max_asks=tasks.max_asks,
        scoreless=True,
        serial_shared=True,  # so each shared task's changes are its own commit (or discard)
    )
    if tasks.jobs is not None:
        config.jobs = tasks.jobs
    if prior is not None and prior.admitted is not None:
        frozen = paths.state_dir / ARTIFACT_NAME
        if frozen.is_file() and frozen.read_text(encoding="utf-8") != artifact:
            raise ResumeConflict(
                "the compiled workflow differs from the one this run froze",
                hint="resume with the same workflow.star and --param values",
            )
        check_same_plan(plan, prior)
        report = ended_report(plan, kinds, config, prior)
        if report is not None:
            print_tasks(plan.order, report, aligned=False)
            print(f"playbook {_validity(report.verdict)}: already finished (spent ${report.spent_usd:.4f})")
            tell_how_to_start_anew(paths.state_dir, report.outcome)
            ending = report_ending(report)
            return Ending(report.outcome, "already finished", ending.exit_code)
    elif not request.resume:
        refuse_existing_workspace(loaded)
    planned = plan_services(
        loaded.services,
        os.environ,
        log_path=paths.session_log,
        resumed=prior is not None,
        plugins=plugins,
    )
    engine_env = planned.task_env(engine_environment())  # a service's secrets reach only that service
    config.env = planned.task_env(os.environ)
    withheld = engine_credentials(plugins)  # what agent turns go without; command tasks too when publishing
    if publisher is not None:  # the forge token is the engine's write, never a task's
        config.env = {key: value for key, value in config.env.items() if key not in withheld}
    held = HeldEvents()  # what the runners say while opening, written after the start line
    runners = _task_runners(plugins, loaded, paths.state_dir, config.env, held)
    config.task_runners = runners
    return PlaybookLane(
        plugins=plugins,
        request=request,
        loaded=loaded,
        paths=paths,
        plan=plan,
        kinds=kinds,
        config=config,
        prior=prior,
        artifact=artifact,
        disclosure=disclosure,
        declaration=declaration,
        publisher=publisher,
        planned=planned,
        engine_env=engine_env,
        withheld=withheld,
        held=held,
        runners=runners,
        memory=memory,
        elapsed_before=_elapsed_before(read_events(paths.session_log)) if prior is not None else 0.0,
    )


def refuse_loop_sections(loaded: LoadedManifest) -> None:
    """Sections only the loop acts on are refused by name rather than silently ignored.

    ([judge], [preflight] and [search] are refused by the manifest loader already, and a
    composite's [publish] above; [repo], [publish], [workspace], [agent], [capabilities],
    [deploy] and [[service]] act.)"""
    m = loaded.manifest
    if m.world.kind is not None or loaded.tables.world:
        raise UnsupportedSectionError(
            f"{loaded.path}: [world] on a playbook is not supported: a playbook has no World "
            "(its workspace's history is the engine's own git memory)",
            hint="remove [world], or run the work as a loop with a [judge]",
        )
    if m.outputs:
        raise UnsupportedSectionError(
            f"{loaded.path}: [outputs] on a playbook is not supported: its agent tasks get no "
            "broker to mediate a write",
            hint="remove [outputs], or run the work as a loop with a [judge]",
        )


class PlaybookLane(GraphLane):
    kind = "playbook"

    def __init__(
        self,
        *,
        plugins: Plugins,
        request: SessionRequest,
        loaded: LoadedManifest,
        paths: RunPaths,
        plan: ValidPlan,
        kinds: Registry[TaskKindSpec],
        config: ExecutorConfig,
        prior: PriorRun | None,
        artifact: str,
        disclosure: Disclosure,
        declaration: Declaration,
        publisher: Publisher | None,
        planned: PlannedServices,
        engine_env: dict[str, str],
        withheld: frozenset[str],
        held: HeldEvents,
        runners: tuple[TaskRunner, ...],
        memory: WorkspaceMemory,
        elapsed_before: float,
    ) -> None:
        super().__init__()
        self.plugins = plugins
        self.request = request
        self.loaded = loaded
        self.manifest: LoadedManifest | None = loaded
        self.paths = paths
        self.plan = plan
        self.kinds = kinds
        self.config = config
        self.prior = prior
        self.artifact = artifact
        self.disclosure = disclosure
        self.declaration = declaration
        self.publisher = publisher  # handed to the lifecycle: publishing at the end is a plugin's
        self.planned = planned
        self.agent_env = dict(loaded.manifest.agent.env)
        self.engine_env = engine_env
        self.withheld = withheld  # the engine's own credentials (crucible_engine_credentials)
        self.held = held
        self.task_runners = runners
        self.elapsed_before = elapsed_before
        self.resumed = request.resume
        self.run_id = stable_run_id(paths.state_dir)
        self.reporter_total: int | None = 1
        self.memory = memory
        self.started = time.monotonic()
        self.wrote_start = False

    def open(self, session: LaneShell) -> None:
        self.attach(session)

    def before_start(self) -> None:
        self.started = time.monotonic()

    def start(self) -> None:
        """The run's `start` line: a playbook carries the task lane's gate label, never a third one."""
        assert self.session is not None
        budget = self.request.budget
        self.session.log.emit(
            wire.Start(
                goal=self.loaded.goal_text(),
                gate="task",
                model=self.loaded.manifest.agent.model or "",
                namespace="",
                iters_total=1,
                max_cost=float(budget.max_cost or 0.0),
                max_secs=int(budget.max_time or 0),
                version=version("crucible-core"),
                run_id=self.run_id,
                manifest=str(self.loaded.path),
                workspace=str(self.paths.workspace),
                backend=self.loaded.manifest.agent.backend,
                resumed=self.request.resume,
            )
        )
        self.wrote_start = True
        self.held.release(self.session.log.emit)  # what the task runners said while opening

    def run(self) -> Ending:
        assert self.session is not None
        session, loaded, paths, memory = self.session, self.loaded, self.paths, self.memory
        if self.resumed:
            rebuilt = rebuild_workspace(loaded, memory, self.engine_env, paths)
        else:
            fresh_workspace(loaded, memory, self.engine_env, paths)
            copy_injects(loaded.injects, paths.workspace)
            rebuilt = False
        paths.state_dir.mkdir(parents=True, exist_ok=True)
        (paths.state_dir / ARTIFACT_NAME).write_text(self.artifact, encoding="utf-8")
        memory.ensure()
        if rebuilt and self.prior is not None:
            shared = {task.name for task in self.plan.tasks if task.isolation is Isolation.SHARED}
            stored = FileStore(paths.state_dir / FILES_DIR_NAME, max_bytes=0)  # read only here
            replay_declared_files(memory, stored, shared, self.prior)
        # the comparability key, as the loop writes it: the compiled workflow and the services in it
        base = memory.base_commit() or ""
        packs = self.plugins.hook.crucible_domain_packs()  # a pack's copy: the identity names the pack
        provenance = packs.provenance(loaded.dir) if packs is not None else None
        identity = run_identity(
            loaded, base, self.artifact, services=self.planned.resolution, provenance=provenance
        )
        session.log.emit(
            wire.Identity(identity=identity, base_commit=base, resumed=True if self.prior else None)
        )
        lifecycle = session.lifecycle(self._mediation(), self.disclosure, self.publisher)
        lifecycle.run_start()
        if self.resumed:
            self.supersede_owed()
        config = self.config
        config.elapsed_before = self.elapsed_before
        config.before_task = lambda root: refresh_frozen(loaded.injects, root)
        config.agent = self._agent_turns(lifecycle)
        config.after_shared_task = memory.settled
        config.services = session.services
        report = self.execute(self.plan, self.kinds, config, self.prior)
        print_tasks(self.plan.order, report, aligned=False)
        print(f"playbook {_validity(report.verdict)}: {report.reason} (spent ${report.spent_usd:.4f})")
        return report_ending(report)

    def closing_events(self, ending: Ending) -> list[wire.Event]:
        """The run's summary, once, ahead of finished and shutdown: a playbook keeps nothing and scores nothing."""
        if not self.wrote_start:
            return []
        spent = self.executor.spent if self.executor is not None else 0.0
        active = self.elapsed_before + time.monotonic() - self.started
        return [
            wire.Summary(
                rows=[],
                gate="task",
                best_score=None,
                iterations=1,
                kept=0,
                discarded=0,
                kept_shas=[],
                spent=round(spent, 6),
                active_s=round(active, 3),
                solved=False,
            )
        ]

    def _mediation(self) -> TurnBroker | None:
        """The mediation point [publish]'s draft pull request is admitted through; None without [publish].

        A playbook's agent tasks get no broker tools: the broker opened here grants none and
        serves none, so it only counts the engine's own writes against the [outputs] bounds."""
        if self.publisher is None:
            return None
        assert self.session is not None
        return open_mediation(
            self.plugins,
            self.declaration,
            emit=self.session.log.emit,
            workspace=self.paths.workspace,
            session_log=self.paths.session_log,
            resumed=self.prior is not None,
            params=self.request.params,
            why="a playbook's agent tasks are granted no broker tools",
        )

    def _agent_turns(self, lifecycle: Lifecycle) -> AgentTurns:
        """Agent tasks run one turn through the manifest's [agent] backend and harness, with
        [agent].env and the plugins' turn hooks, as the loop's turns do."""
        cache: dict[str, AgentBackend] = {}
        plugins, loaded, paths = self.plugins, self.loaded, self.paths

        def backend() -> AgentBackend:
            if "backend" not in cache:
                paths.ensure_state_dirs()
                shell = Shell(cwd=paths.workspace, env={})
                cache["backend"] = build_drivers(plugins, loaded, paths, shell).backend
            return cache["backend"]

        return AgentTurns(backend, loaded.manifest.agent.env, hooks=lifecycle, withheld=self.withheld)


def _validity(verdict: str) -> str:
    return "valid" if verdict == "pass" else "invalid"


def _task_runners(
    plugins: Plugins, loaded: LoadedManifest, state: Path, env: dict[str, str], held: HeldEvents
) -> tuple[TaskRunner, ...]:
    """The task runners the manifest's [deploy] section configures (none without one)."""
    return open_configured_runners(plugins, loaded, state_dir=state, env=env, emit=held)


def _elapsed_before(events: Iterable[dict[str, Any]]) -> float:
    """Time earlier processes of this run spent, from the log: each process's first to last
    event (`start` or `recovery` begins a process), so time spent dead does not count."""
    total = 0.0
    first = last = None
    for event in events:
        ts = event.get("ts")
        if not isinstance(ts, int | float):
            continue
        if event.get("kind") in ("start", "recovery") and first is not None and last is not None:
            total += last - first
            first = None
        first = ts if first is None else first
        last = ts
    if first is not None and last is not None:
        total += last - first
    return max(0.0, total)
