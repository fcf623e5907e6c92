"""The loop lane: the keep/discard loop (with a round before it and an authored scored graph) as a session body.

`prepare_loop` resolves everything the loop needs before the log opens (the resume's fold and
budget, the declaration, the publisher, the authored graph, the services, the drivers, the
runners, the round a strategy plugin prepares for `[search]`); `LoopLane` then builds the engine
once the log exists and runs the baseline, the round and the loop. The loop itself (run/loop.py)
calls only the drivers and the engine's operations.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from crucible_core import __version__, start_up
from crucible_core.broker.declaration import Declaration, refuse_uncovered
from crucible_core.broker.service import (
    TurnBroker,
    declaration_for,
    open_broker,
    recorded_params,
)
from crucible_core.contract import wire
from crucible_core.control import orders
from crucible_core.control.ledger import Ledger
from crucible_core.errors import CrucibleError, ExitCode, PreflightFailed, WorkspaceError
from crucible_core.lanes.lane import Ending, Shell
from crucible_core.manifest.loader import LoadedManifest
from crucible_core.manifest.paths import RunPaths
from crucible_core.plugins import Plugins
from crucible_core.protocols import Publisher, RecordedKept, recorded_kept
from crucible_core.run.agent_ready import refuse_unstartable_agent
from crucible_core.run.assemble import build_engine
from crucible_core.run.begin import begin_fresh, begin_resumed, prove_environment
from crucible_core.run.budget import Budget
from crucible_core.run.drivers import DriverChoice, Drivers, build_drivers
from crucible_core.run.engine import Engine, agent_environment, engine_credentials, engine_environment
from crucible_core.run.lifecycle import Lifecycle
from crucible_core.run.loop import LoopExit, Run, run_baseline, run_loop
from crucible_core.run.opened_runners import DEFAULT_MEASURE_TIMEOUT, HeldEvents, RunRunners, open_run_runners
from crucible_core.run.prompt import DEFAULT_METHOD
from crucible_core.run.publish import build_publisher
from crucible_core.run.rounds import SearchRound, prepare_round
from crucible_core.run.state_lock import StateLock
from crucible_core.run.workflow_iteration import AuthoredGraph, admit_authored_graph, freeze_artifact
from crucible_core.run.workspace_setup import refuse_existing_workspace
from crucible_core.services import run_services
from crucible_core.session_log import log_size, read_events
from crucible_core.shell import Shell as CommandShell

# The log's fold, the live-run probe and the resume's checks load with the first resume: a fresh
# run reads no log and asks no earlier engine anything.
if TYPE_CHECKING:
    from crucible_core.contract.fold import Folded
    from crucible_core.manifest.models import PreflightSection
    from crucible_core.run.preflight import Preflight
    from crucible_core.session.request import SessionRequest

# Every order of the operator vocabulary: the loop honours them all.
LOOP_ORDERS = frozenset(orders.BY_NAME)
DEFAULT_ITERATIONS = 10  # agent turns a fresh run takes when --iterations is not given


def prepare_loop(
    plugins: Plugins,
    request: SessionRequest,
    loaded: LoadedManifest,
    take_lock: Callable[[Path], StateLock],
) -> LoopLane | Ending:
    """Resolve a loop run before its log opens; errors here propagate as CrucibleError.

    The state directory's lock is taken before anything is read or written there (a second
    engine on the same directory is refused, StateLocked). A resume of a run that already ended
    is answered here: nothing is written, and the Ending says so.
    """
    paths = RunPaths.resolve(loaded, state_dir=request.state_dir, steer=request.steer)
    # Every name resolves (unknown or duplicate plugins fail) before anything is created on disk.
    DriverChoice.of(loaded, plugins, harness=request.options.harness).verify(plugins)
    plugins.registry("reporter").get(request.ui, where="--ui")
    take_lock(paths.state_dir)
    budget = request.budget
    if budget.iterations is None and not request.resume:  # a resume keeps the original run's
        budget = attrs.evolve(budget, iterations=DEFAULT_ITERATIONS)
    folded: Folded | None = None
    if request.resume:
        from crucible_core.contract.fold import Folded, fold_path
        from crucible_core.control.client import live_run
        from crucible_core.run.resume import (
            already_ended,
            loop_exit,
            refuse_nothing_to_resume,
            resumed_budget,
        )

        alive = live_run(paths.state_dir)
        if alive is not None:
            raise WorkspaceError(
                f"the run recorded in {paths.state_dir} is still running (pid {alive.get('pid', '?')})",
                hint="watch it with `crucible status`, or `crucible stop` it before resuming",
            )
        folded = fold_path(paths.session_log) if log_size(paths.session_log) else Folded()
        if folded.events == 0:
            refuse_nothing_to_resume(loaded, paths)
        changes = Ledger(paths.admissions).granted(orders.REAPPLIED_ON_RESUME)  # read only
        budget = resumed_budget(request.budget, folded, [entry.payload for entry in changes])
        ended = already_ended(folded, budget, no_early_stop=request.options.no_early_stop)
        if ended is not None:
            sys.stderr.write(f"crucible: {ended}\n")
            outcome = loop_exit(folded.outcome or "finished")
            return Ending(outcome.value, ended, outcome.exit_code)
    else:
        refuse_existing_workspace(loaded, paths)
    # The resolved declaration: an unknown output kind or tool, or a grant the disclosure does not
    # cover, refuses the run here, before the workspace or the log exists.
    declaration = declaration_for(plugins, loaded)
    params = dict(request.params) or (
        recorded_params(read_events(paths.session_log)) if request.resume else {}
    )
    refuse_uncovered(declaration, params)  # an undisclosed grant never reaches the agent
    publisher = build_publisher(plugins, loaded.manifest.publish) if loaded.manifest.publish else None
    # A scored workflow compiles and validates here, before anything is created; its TOML is frozen.
    workflow = admit_authored_graph(plugins, loaded, params)
    if workflow is not None:
        freeze_artifact(workflow, paths, resume=request.resume)
    # The catalog is read and the services resolved before the log exists; agent turns cannot
    # be truncated like a task, so a service they need and cannot have refuses the run here.
    planned = run_services.plan_services(
        loaded.services,
        os.environ,
        log_path=paths.session_log,
        resumed=folded is not None,
        plugins=plugins,
    )
    planned.refuse_unavailable(loaded.manifest.agent.services)
    paths.ensure_state_dirs()
    base_env = planned.task_env(engine_environment())  # a service's secrets reach only the service
    shell = CommandShell(cwd=paths.workspace, env=base_env)
    drivers = build_drivers(
        plugins, loaded, paths, shell, harness=request.options.harness, model=request.options.model
    )
    # What the world's own record kept, read before anything repairs or rolls back the world.
    world_kept = recorded_kept(drivers.world) if folded is not None else None
    if folded is not None:
        from crucible_core.run.resume import refuse_disagreeing_log

        refuse_disagreeing_log(folded, paths, world_kept)
    # the engine's own credentials (a forge token, a record store's keys) never reach a turn
    agent_env = agent_environment(base_env, loaded, engine_credentials(plugins))
    # The round before the deep loop (a strategy plugin's): what it cannot use is said before anything.
    search = prepare_round(
        plugins,
        loaded,
        request.options,
        private_dir=paths.private_dir,
        resume=folded is not None,
        unfinished=folded is not None
        and folded.last_phase == wire.WIDE_PHASE
        and not wire.wide_round_decided(folded.rows),
    )
    if search is not None:
        search.refuse(
            drivers.world, drivers.choice.world, drivers.backend, drivers.choice.agent_name(), request.caps
        )
    # Before the log exists, so fixing the agent and running the same command again just works.
    # A workspace that setup has not finished is not looked in (a resume sets it up again);
    # a fresh run looks again once setup has made it.
    setup_done = folded is None or folded.fingerprint is not None
    refuse_unstartable_agent(drivers.backend, agent_env, paths.workspace if setup_done else None)
    held = HeldEvents()  # what the runners say while opening, written after the start line
    opened = _open_runners(
        plugins, request, loaded, paths, drivers, base_env, held, graph=workflow is not None, search=search
    )
    recorded = folded.start.run_id if folded is not None and folded.start is not None else None
    return LoopLane(
        plugins=plugins,
        request=request,
        loaded=loaded,
        paths=paths,
        budget=budget,
        folded=folded,
        world_kept=world_kept,
        declaration=declaration,
        params=params,
        publisher=publisher,
        workflow=workflow,
        planned=planned,
        base_env=base_env,
        shell=shell,
        drivers=drivers,
        agent_env=agent_env,
        search=search,
        held=held,
        opened=opened,
        run_id=str(recorded or uuid.uuid4().hex[:16]),
    )


class LoopLane:
    """The keep/discard loop as a session body (see lanes/lane.py for the order of the calls)."""

    kind = "loop"
    honours = LOOP_ORDERS
    graceful = "stopping once the current iteration is decided"
    without_bridge = "STEER.md and signals still work"
    aborted = "the running child was killed"

    def __init__(
        self,
        *,
        plugins: Plugins,
        request: SessionRequest,
        loaded: LoadedManifest,
        paths: RunPaths,
        budget: Budget,
        folded: Folded | None,
        world_kept: RecordedKept | None,
        declaration: Declaration,
        params: dict[str, str],
        publisher: Publisher | None,
        workflow: AuthoredGraph | None,
        planned: run_services.PlannedServices,
        base_env: dict[str, str],
        shell: CommandShell,
        drivers: Drivers,
        agent_env: dict[str, str],
        search: SearchRound | None,
        held: HeldEvents,
        opened: RunRunners,
        run_id: str,
    ) -> None:
        self.plugins = plugins
        self.request = request
        self.loaded = loaded
        self.manifest: LoadedManifest | None = loaded
        self.paths = paths
        self.budget = budget
        self.folded = folded
        self.world_kept = world_kept
        self.declaration = declaration
        self.params = params
        self.publisher = publisher  # handed to the lifecycle: publish-on-keep is a plugin's
        self.workflow = workflow
        self.planned = planned
        self.base_env = base_env
        self.shell = shell
        self.drivers = drivers
        self.full_agent_env = agent_env
        self.agent_env = dict(loaded.manifest.agent.env)  # its values are masked in the log
        self.engine_env = base_env
        self.search = search
        self.held = held
        self.opened = opened
        self.run_id = run_id
        self.resumed = request.resume
        self.reporter_total = budget.iterations
        self._engine: Engine | None = None
        self.ledger: Ledger | None = None
        self.run_state: Run | None = None
        self.started = 0.0

    @property
    def engine(self) -> Engine:
        assert self._engine is not None, "the lane is not open yet"
        return self._engine

    # -- the session's calls -------------------------------------------------------------------
    def open(self, session: Shell) -> None:
        """Build the engine once, from its parts: nothing is written to the log here."""
        loaded, paths, request = self.loaded, self.paths, self.request
        self.ledger = session.ledger
        m = loaded.manifest
        choice = self.drivers.choice

        def make_broker(engine: Engine) -> TurnBroker | None:
            return open_broker(
                self.plugins,
                self.declaration,
                engine,
                resumed=request.resume,
                params=self.params,
                # No server for an agent that cannot call one (saves the SDK import and start, ~1 s CPU).
                unreachable=choice.mcp_unreachable(self.plugins),
            )

        def make_lifecycle(engine: Engine) -> Lifecycle:
            return session.lifecycle(engine.broker, self.declaration.capabilities, self.publisher)

        # what the agent may write to ask for a human, read by the plugins that answer for it
        signals = tuple(s for s in self.plugins.hook.crucible_agent_signals() if s is not None)
        method = (
            loaded.resolve(m.agent.method_prompt).read_text(encoding="utf-8")
            if m.agent.method_prompt
            else DEFAULT_METHOD + "".join(s.method_text() for s in signals)
        )
        # a run directory copied from a domain pack: its identity names the pack (absent plugin: none)
        packs = self.plugins.hook.crucible_domain_packs()
        self._engine = build_engine(
            loaded=loaded,
            paths=paths,
            drivers=self.drivers,
            log=session.log,
            budget=self.budget,
            options=request.options,
            redactor=session.redactor,
            agent_env=self.full_agent_env,
            goal=loaded.goal_text(),
            method_template=method,
            preflight=_preflight(m.preflight, self.shell),
            workflow=self.workflow,
            caps=request.caps,
            task_runners=self.opened.runners,
            remote_measure=self.opened.measure,
            service_resolution=self.planned.resolution,
            provenance=packs.provenance(loaded.dir) if packs is not None else None,
            signals=signals,
            inbox=session.inbox,
            ledger=session.ledger,
            max_park=request.max_park,
            state_guards=session.state_guards,
            broker=make_broker,
            declaration=self.declaration,
            lifecycle=make_lifecycle,
        )

    def before_start(self) -> None:
        if self.folded is not None:
            from crucible_core.run.resume import record_resume_budget

            assert self.ledger is not None
            record_resume_budget(self.ledger, self.request.budget, self.engine.note)
        self.started = time.monotonic()

    def start(self) -> None:
        engine, drivers, budget = self.engine, self.drivers, self.budget
        m = self.loaded.manifest
        runs_harness = drivers.choice.runs_harness  # the start line names only what the backend runs
        engine.log.emit(
            wire.Start(
                goal=engine.goal,
                gate=drivers.judge.gate,
                # only what the backend uses: a command backend runs no harness and no model
                model=(self.request.options.model or m.agent.model or "") if runs_harness else "",
                namespace="",
                # the contract writes 0 for "no cap"; `budget` keeps our nulls exactly
                iters_total=budget.iterations or 0,
                max_cost=float(budget.max_cost or 0.0),
                max_secs=int(budget.max_time or 0),
                version=__version__,
                run_id=self.run_id,
                manifest=str(self.loaded.path),
                workspace=str(self.paths.workspace),
                direction=engine.direction.value if drivers.judge.scored else None,
                world=drivers.choice.world,
                judge=drivers.choice.judge,
                backend=drivers.choice.backend,
                harness=drivers.choice.harness if runs_harness else None,
                budget=budget.to_wire(),
                resumed=self.request.resume,
            )
        )
        engine.log.emit(wire.Exposure(**self.declaration.to_wire(), params=self.params))
        self.held.release(engine.log.emit)  # what the task runner said while opening (leftovers it deleted)
        remote_measure = self.opened.measure
        if remote_measure is not None:
            engine.note(
                f"the judge needs {remote_measure.needs!r}: each measure runs on {remote_measure.where}"
            )

    def run(self) -> Ending:
        engine, folded = self.engine, self.folded
        # Beginning the run prepares the world, whose modules (the git world's: dulwich) load
        # here: part of the `crucible` process's start-up, without collection (start_up.py).
        start_up.goes_on()
        try:
            if folded is not None:
                run, settled = begin_resumed(engine, self.shell, folded, self.started, self.world_kept)
                self.run_state = run
            else:
                run = self.run_state = begin_fresh(engine, self.shell, self.started)
        finally:
            start_up.settle()
        if folded is None:
            prove_environment(engine, run)
            settled = run_baseline(engine, run)
        if settled is None and self.search is not None:
            settled = self.search.run(engine, run, resumed=folded is not None)
        exit_ = settled or run_loop(engine, run)
        return Ending(exit_.value, _reason(exit_, run), exit_.exit_code)

    def request_stop(self, reason: str) -> None:
        self.engine.gates.request_stop(reason)

    def interruptible(self) -> bool:
        """Only while a child runs (a turn or a measure); anywhere else the loop notices the abort
        at its next step boundary, so no bookkeeping is cut in half."""
        return self.engine.gates.interruptible

    def aborts_on_signal(self) -> bool:
        return False  # the loop always stops at its next iteration head first

    def wind_down(self) -> None:
        run = self.run_state
        if run is None:
            return
        try:
            self.engine.world.restore(run.segment.best_token)
        except Exception as exc:  # already failing; say so and keep closing the log
            self.engine.note(f"could not restore the last kept state: {exc}", level="error")

    def close(self) -> None:
        self.opened.close()  # the round's runners among them
        if self.search is not None:
            self.search.close()
        if self._engine is not None:
            self._engine.close()  # its prompt copy

    def closing_events(self, ending: Ending) -> list[wire.Event]:
        run = self.run_state
        events: list[wire.Event] = []
        if run is not None:
            seg = run.segment
            events.append(
                wire.Summary(
                    rows=list(run.rows),
                    gate=self.engine.judge.gate,
                    best_score=seg.best.score,
                    baseline_score=seg.baseline_score,
                    iterations=run.iteration,
                    kept=run.kept,
                    discarded=run.discarded,
                    kept_shas=run.kept_shas,
                    spent=round(run.spent, 6),
                    active_s=round(run.active_seconds(), 3),
                    solved=run.solved,
                )
            )
        events.append(wire.Phase(phase="finished", iter=self.iterations()))
        return events

    def iterations(self) -> int:
        return self.run_state.iteration if self.run_state is not None else 0

    def exit_code_of(self, error: CrucibleError) -> ExitCode:
        """A failed run exits 4 (the documented code), save a failed start rung, which has its own."""
        return error.exit_code if isinstance(error, PreflightFailed) else ExitCode.RUN_FAILED


def _open_runners(
    plugins: Plugins,
    request: SessionRequest,
    loaded: LoadedManifest,
    paths: RunPaths,
    drivers: Drivers,
    env: dict[str, str],
    held: HeldEvents,
    *,
    graph: bool,
    search: SearchRound | None,
) -> RunRunners:
    """Where the judge's measure, an authored graph's tasks and the round's work run: here, or
    through the task runners [deploy] configures. A need nobody serves, or an unreachable
    cluster, refuses the run here, before the log exists."""
    judge = loaded.manifest.judge
    opened = open_run_runners(
        plugins,
        loaded,
        drivers.judge,
        caps=request.caps,
        state_dir=paths.state_dir,
        workspace=paths.workspace,
        timeout=(judge.measure_timeout if judge else None) or DEFAULT_MEASURE_TIMEOUT,
        env=env,
        emit=held,
        graph=graph,
        round_needs=search.needs if search is not None else None,
    )
    if search is None:
        return opened
    try:
        search.place(
            plugins,
            state_dir=paths.state_dir,
            caps=request.caps,
            backend=drivers.backend,
            backend_name=drivers.choice.agent_name(),
            env=env,
            runners=opened.runners,
        )
    except CrucibleError:
        opened.close()
        raise
    return opened


def _preflight(section: PreflightSection | None, shell: CommandShell) -> Preflight | None:
    """The [preflight] rungs' runner; its module loads only for a manifest that has some."""
    if section is None:
        return None
    from crucible_core.run.preflight import Preflight

    return Preflight(section, shell)


def _reason(exit_: LoopExit, run: Run) -> str:
    return {
        LoopExit.FINISHED: f"iterations spent ({run.iteration})",
        LoopExit.SOLVED: f"solved at iteration {run.iteration}",
        LoopExit.BUDGET: "budget spent",
        LoopExit.STOPPED: "stopped by the operator",
        LoopExit.ESCALATED: "the agent escalated",
        LoopExit.STALLED: "the agent could not be reached",
        LoopExit.ERROR: "error",
    }[exit_]
