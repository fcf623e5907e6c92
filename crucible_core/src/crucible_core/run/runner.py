"""Running one crucible run end to end: open the log, set up, baseline, loop, and shut down exactly once."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from crucible_core import __version__
from crucible_core.broker.declaration import refuse_uncovered
from crucible_core.broker.service import build_broker, declaration_for, recorded_params
from crucible_core.contract import wire
from crucible_core.contract.decide import Best
from crucible_core.contract.fold import Folded, fold_path
from crucible_core.contract.reading import Reading
from crucible_core.contract.recovery import FINAL_OUTCOMES, classify, unlogged_keep
from crucible_core.control import orders
from crucible_core.control.bridge import ControlBridge
from crucible_core.control.client import live_run
from crucible_core.control.inbox import Order
from crucible_core.control.ledger import Ledger
from crucible_core.errors import CrucibleError, ExitCode, PreflightFailed, ResumeConflict, WorkspaceError
from crucible_core.manifest.loader import LoadedManifest, load_manifest
from crucible_core.manifest.paths import RunPaths
from crucible_core.plugins import Plugins
from crucible_core.protocols import RecordedKept, Reporter, ReporterContext, ReporterFactory, recorded_kept
from crucible_core.redact import Redactor
from crucible_core.run import distress
from crucible_core.run.agent_ready import refuse_unstartable_agent
from crucible_core.run.assemble import build_engine
from crucible_core.run.budget import Budget, layered_budget
from crucible_core.run.drivers import DriverChoice, Drivers, build_drivers
from crucible_core.run.engine import Engine, RunOptions, agent_environment, engine_environment
from crucible_core.run.gates import Aborted, Gates
from crucible_core.run.identity import run_identity
from crucible_core.run.lifecycle import Lifecycle, RunContext
from crucible_core.run.loop import LoopExit, Run, Segment, fingerprint, run_baseline, run_loop
from crucible_core.run.observers import ObserverFanout
from crucible_core.run.parking import Pending
from crucible_core.run.preflight import Preflight
from crucible_core.run.prompt import DEFAULT_METHOD
from crucible_core.run.publish import KeptPublisher, build_publisher
from crucible_core.run.remote_measure import DEFAULT_MEASURE_TIMEOUT, HeldEvents, RunRunners, open_run_runners
from crucible_core.run.state_lock import StateLock
from crucible_core.run.wide import (
    RoundFiles,
    WideSettings,
    forget_round,
    recorded_settings,
    refuse_unforkable,
    sweep_forks,
    wide_round_due,
    wide_settings,
)
from crucible_core.run.wide_placement import ProposalPlacement, place_proposals, refuse_unsendable_turns
from crucible_core.run.workflow_iteration import admit_authored_graph, freeze_artifact
from crucible_core.run.workspace_setup import (
    prepare_workspace,
    refuse_existing_workspace,
    source_notice,
    workspace_in_use,
)
from crucible_core.services import run_services
from crucible_core.services.runtime import ServiceRuntime
from crucible_core.session_log import SessionLog, log_size, read_events
from crucible_core.shell import Shell


@attrs.frozen
class RunRequest:
    manifest: Path
    budget: Budget
    options: RunOptions = RunOptions()
    state_dir: Path | None = None
    steer: Path | None = None
    ui: str = "console"
    resume: bool = False
    max_park: float | None = None  # seconds an approval wait may park the run; None waits indefinitely
    params: dict[str, str] = attrs.field(factory=dict)  # run parameters ([outputs] targets bind them)
    caps: frozenset[str] = frozenset()  # --cap: what this machine provides ([judge]/[search].needs)


@attrs.frozen
class RunResult:
    exit: LoopExit
    reason: str
    exit_code: ExitCode


def load_for_run(plugins: Plugins, manifest: Path) -> LoadedManifest:
    """The manifest, its driver tables validated by the plugins this run loaded."""
    return load_manifest(manifest, plugins=plugins)


def make_reporter(plugins: Plugins, name: str, iterations: int | None) -> Reporter:
    factory: ReporterFactory = plugins.registry("reporter").get(name, where="--ui")
    return factory(ReporterContext(stream=sys.stderr, iterations=iterations))


def signal_name(signum: int) -> str:
    name = signal.Signals(signum).name
    return "Ctrl-C (SIGINT)" if signum == signal.SIGINT else name


def _tell_operator(text: str) -> None:
    """One line on standard error, outside the log (the console's live table makes room for it)."""
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # nobody is reading stderr any more
        pass


class _SignalStop:
    """SIGINT/SIGTERM ask the loop to stop at the next iteration head; a second one aborts now."""

    def __init__(self, request_stop: Callable[[str], None]) -> None:
        self.request_stop = request_stop
        self.count = 0
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> _SignalStop:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.previous[sig] = signal.signal(sig, self.handle)
        return self

    def handle(self, signum: int, _frame: Any) -> None:
        self.count += 1
        name = signal_name(signum)
        if self.count > 1:
            _tell_operator(f"crucible: {name} again: aborting now")
            raise KeyboardInterrupt
        self.request_stop(f"received {name}")
        # The log says so when the stop takes effect, which can be a whole agent turn away;
        # the person who pressed Ctrl-C hears back now (a signal handler must not write the log).
        _tell_operator(
            f"crucible: {name}: stopping once the current iteration is decided "
            f"({'Ctrl-C' if signum == signal.SIGINT else 'the signal'} again aborts now)"
        )

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def execute(plugins: Plugins, request: RunRequest) -> RunResult:
    """Run a manifest; errors before the session log exists propagate as CrucibleError.

    The state directory's lock is taken before anything is read or written there and held
    until the log is closed: a second engine on the same directory is refused (StateLocked).
    """
    loaded = load_for_run(plugins, request.manifest)
    paths = RunPaths.resolve(loaded, state_dir=request.state_dir, steer=request.steer)
    # Every name resolves (unknown or duplicate plugins fail) before anything is created on disk.
    DriverChoice.of(loaded, plugins, harness=request.options.harness).verify(plugins)
    plugins.registry("reporter").get(request.ui, where="--ui")
    lock = StateLock.acquire(paths.state_dir)
    try:
        return _execute_locked(plugins, request, loaded, paths, lock)
    finally:
        lock.release()


def _execute_locked(
    plugins: Plugins, request: RunRequest, loaded: LoadedManifest, paths: RunPaths, lock: StateLock
) -> RunResult:
    budget = request.budget
    folded: Folded | None = None
    if request.resume:
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
            outcome = _loop_exit(folded.outcome or "finished")
            return RunResult(outcome, ended, outcome.exit_code)
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
    workflow = admit_authored_graph(loaded, plugins.registry("task kind"), params)
    if workflow is not None:
        freeze_artifact(workflow, paths, resume=request.resume)
    # The catalog is read and the services resolved before the log exists; agent turns cannot
    # be truncated like a task, so a service they need and cannot have refuses the run here.
    planned = run_services.plan_services(
        loaded.services, os.environ, log_path=paths.session_log, resumed=folded is not None
    )
    planned.refuse_unavailable(loaded.manifest.agent.services)
    paths.ensure_state_dirs()
    base_env = planned.task_env(engine_environment())  # a service's secrets reach only the service
    shell = Shell(cwd=paths.workspace, env=base_env)
    drivers = build_drivers(
        plugins, loaded, paths, shell, harness=request.options.harness, model=request.options.model
    )
    # What the world's own record kept, read before anything repairs or rolls back the world.
    world_kept = recorded_kept(drivers.world) if folded is not None else None
    if folded is not None:
        refuse_disagreeing_log(folded, paths, world_kept)
    agent_env = agent_environment(base_env, loaded)
    m = loaded.manifest
    wide = wide_settings(loaded.manifest, request.options.wide, request.options.wide_keep)
    if folded is None:
        forget_round(paths.private_dir)  # what an earlier run in this state directory left
    elif wide is None:
        wide = recorded_settings(paths.private_dir)  # a round started with --wide, resumed without it
    if wide is not None:
        refuse_unforkable(drivers.world, drivers.choice.world)
    # A wide round sent elsewhere needs a backend whose turn is one command: said before anything.
    refuse_unsendable_turns(
        wide.needs if wide is not None else None, request.caps, drivers.backend, drivers.choice.agent_name()
    )
    # Before the log exists, so fixing the agent and running the same command again just works.
    # A workspace that setup has not finished is not looked in (a resume sets it up again);
    # a fresh run looks again once setup has made it.
    setup_done = folded is None or folded.fingerprint is not None
    refuse_unstartable_agent(drivers.backend, agent_env, paths.workspace if setup_done else None)
    held = HeldEvents()  # what the runners say while opening, written after the start line
    opened, placement = _open_runners(
        plugins, request, loaded, paths, drivers, base_env, held, graph=workflow is not None, wide=wide
    )
    remote_measure = opened.measure
    reporter = make_reporter(plugins, request.ui, budget.iterations)
    redactor = Redactor()
    redactor.add_env(loaded.manifest.agent.env)
    redactor.add_engine_env(base_env)
    redactor.add(planned.secret_values(os.environ))  # a service's secrets: never in the log either
    log = SessionLog(paths.session_log, redactor)
    fanout = ObserverFanout(note=lambda text: log.emit(wire.Note(msg=text, level="warn")))
    fanout.add(f"reporter {request.ui!r}", reporter.on_event)
    fanout.add_plugins(plugins, "crucible_session_event")
    log.observers.append(fanout)
    goal = loaded.goal_text()
    method = (
        loaded.resolve(m.agent.method_prompt).read_text(encoding="utf-8")
        if m.agent.method_prompt
        else DEFAULT_METHOD
    )
    engine = build_engine(
        loaded=loaded,
        paths=paths,
        drivers=drivers,
        log=log,
        budget=budget,
        options=request.options,
        redactor=redactor,
        agent_env=agent_env,
        goal=goal,
        method_template=method,
        preflight=Preflight(m.preflight, shell) if m.preflight is not None else None,
    )
    engine.workflow = workflow
    engine.caps, engine.task_runners = request.caps, opened.runners
    if remote_measure is not None:
        engine.remote_measure = remote_measure
        remote_measure.note = engine.note
    recorded = folded.start.run_id if folded is not None and folded.start is not None else None
    run_id = str(recorded or uuid.uuid4().hex[:16])
    choice = drivers.choice
    engine.service_resolution = planned.resolution
    engine.broker = broker = build_broker(
        plugins,
        declaration,
        engine,
        resumed=request.resume,
        params=params,
        # No server for an agent that cannot call one (saves the SDK import and start, ~1 s CPU).
        unreachable=choice.mcp_unreachable(plugins),
    )
    if publisher is not None and loaded.manifest.publish is not None:
        engine.publishing = KeptPublisher(
            loaded.manifest.publish,
            publisher,
            broker.mediator.admit,
            engine.note,
            run_id,
            paths.workspace,
            base_env,
        )
    services = planned.open(state_dir=paths.state_dir, emit=log.emit, run_id=run_id)
    engine.lifecycle = Lifecycle(
        plugins,
        RunContext(
            loaded,
            paths.workspace,
            paths.state_dir,
            paths.private_dir,
            run_id,
            request.resume,
            broker,
            services,
        ),
        note=lambda text: engine.note(text, level="warn"),
        disclosure=declaration.capabilities,
    )
    gates = engine.gates
    gates.max_park = request.max_park
    gates.ledger = Ledger(paths.admissions, redact=redactor.obj)
    bridge = ControlBridge(gates.ledger, gates.inbox)
    engine.state_guards += [
        lambda: "the state lock" if lock.reassert() else None,
        gates.ledger.restore_if_damaged,
        bridge.restore_record,
    ]
    for warning in gates.ledger.problems:
        engine.note(warning, level="warn")
    if folded is not None:
        record_resume_budget(gates.ledger, request.budget, engine.note)
    started = time.monotonic()
    runs_harness = drivers.choice.runs_harness  # the start line names only what the backend runs
    exit_, reason = LoopExit.ERROR, "engine error"
    failed_code: ExitCode | None = None  # an error whose own documented code beats the generic one
    run: Run | None = None
    try:
        with _SignalStop(gates.request_stop), _AbortSignal(gates):
            log.emit(
                wire.Start(
                    goal=goal,
                    gate=drivers.judge.gate,
                    # only what the backend uses: a command backend runs no harness and no model
                    model=(request.options.model or m.agent.model or "") if runs_harness else "",
                    namespace="",
                    # the contract writes 0 for "no cap"; `budget` keeps our nulls exactly
                    iters_total=budget.iterations or 0,
                    max_cost=float(budget.max_cost or 0.0),
                    max_secs=int(budget.max_time or 0),
                    version=__version__,
                    run_id=run_id,
                    manifest=str(loaded.path),
                    workspace=str(paths.workspace),
                    direction=engine.direction.value if drivers.judge.scored else None,
                    world=drivers.choice.world,
                    judge=drivers.choice.judge,
                    backend=drivers.choice.backend,
                    harness=drivers.choice.harness if runs_harness else None,
                    budget=budget.to_wire(),
                    resumed=request.resume,
                )
            )
            log.emit(wire.Exposure(**declaration.to_wire(), params=params))
            held.release(log.emit)  # what the task runner said while opening (leftovers it deleted)
            if remote_measure is not None:
                engine.note(
                    f"the judge needs {remote_measure.needs!r}: each measure runs on {remote_measure.runner.name}"
                )
            try:
                bridge.start(paths.control_file)
            except OSError as exc:
                engine.note(
                    f"the control bridge could not start ({exc}); STEER.md and signals still work", "warn"
                )
            if folded is not None:
                run, settled = _resume(engine, shell, folded, started, world_kept)
            else:
                run = _fresh(engine, shell, started)
                prove_environment(engine, run)
                settled = run_baseline(engine, run)
            if settled is None:
                wide_round = wide_round_due(
                    engine, run, wide, resumed=folded is not None, placement=placement
                )
                if wide_round is not None:
                    settled = wide_round()
            exit_ = settled or run_loop(engine, run)
            reason = _reason(exit_, run)
    except Aborted:
        exit_, reason = LoopExit.STOPPED, "aborted by the operator"
        engine.note("aborted by the operator: the running child was killed", level="warn")
        _restore_quietly(engine, run)
    except KeyboardInterrupt:
        exit_, reason = LoopExit.STOPPED, "interrupted twice: aborted"
        _restore_quietly(engine, run)
    except CrucibleError as exc:
        exit_, reason = LoopExit.ERROR, exc.render()
        if isinstance(exc, PreflightFailed):
            failed_code = exc.exit_code
        engine.note(reason, level="error")
        _restore_quietly(engine, run)
    except Exception as exc:  # a plugin bug must still close the log with exactly one shutdown
        exit_, reason = LoopExit.ERROR, f"internal error: {type(exc).__name__}: {exc}"
        engine.note(reason, level="error")
        _restore_quietly(engine, run)
    finally:
        bridge.close()
        if exit_ is LoopExit.STOPPED:
            gates.settle_aborts()
        engine.lifecycle.run_end(exit_.value, reason, run.iteration if run else 0)
        _stop_services(engine, planned, services)
        opened.close()  # the wide proposals' runners among them
        _finish(engine, run, exit_, reason)
        _close_reporter(reporter, request.ui, fanout)
    return RunResult(exit_, reason, failed_code or exit_.exit_code)


def _open_runners(
    plugins: Plugins,
    request: RunRequest,
    loaded: LoadedManifest,
    paths: RunPaths,
    drivers: Drivers,
    env: dict[str, str],
    held: HeldEvents,
    *,
    graph: bool,
    wide: WideSettings | None,
) -> tuple[RunRunners, ProposalPlacement | None]:
    """Where the judge's measure, an authored graph's tasks and the wide proposals run: here, or
    through the task runners [deploy] configures. A need nobody serves, or an unreachable
    cluster, refuses the run here, before the log exists."""
    judge = loaded.manifest.judge
    wide_needs = wide.needs if wide is not None else None
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
        wide_needs=wide_needs,
    )
    if wide is None:
        return opened, None
    try:
        placement = place_proposals(
            plugins,
            loaded,
            state_dir=paths.state_dir,
            needs=wide_needs,
            caps=request.caps,
            backend=drivers.backend,
            backend_name=drivers.choice.agent_name(),
            env=env,
            runners=opened.runners,
        )
    except CrucibleError:
        opened.close()
        raise
    return opened, placement


def _stop_services(
    engine: Engine, planned: run_services.PlannedServices, services: ServiceRuntime | None
) -> None:
    """Every path out of a run stops its services (signal, grace, kill) before the shutdown line."""
    try:
        planned.shut(services)
    except Exception as exc:  # stopping must not cost the shutdown line; the guard still reaps children
        engine.note(f"stopping the run's services failed: {type(exc).__name__}: {exc}", level="warn")


def prove_environment(engine: Engine, run: Run) -> None:
    """[preflight] start rungs, before the baseline: a failure is a `preflight-failed` row and a
    PreflightFailed stop, with no agent turn and no measure spent."""
    if engine.preflight is None:
        return
    engine.phase("preflight", 0)
    try:
        engine.preflight.prove_start()
    except PreflightFailed as exc:
        engine.row(
            run,
            iteration=0,
            verdict="preflight-failed",
            reading=Reading.invalid(exc.message),
            token=run.segment.best_token,
        )
        raise


def _close_reporter(reporter: Reporter, name: str, fanout: ObserverFanout) -> None:
    """A reporter that already failed, or fails now, costs only its own output."""
    if f"reporter {name!r}" in fanout.disabled():
        return
    try:
        reporter.close()
    except Exception as exc:
        sys.stderr.write(
            f"crucible: warning: reporter {name!r} failed to close: {type(exc).__name__}: {exc}\n"
        )


def _fresh(engine: Engine, shell: Shell, started: float) -> Run:
    """A new run: set up the workspace, record the identity, snapshot the baseline, open segment 0."""
    drivers = engine.drivers
    engine.phase("starting", 0)
    notice = source_notice(engine.loaded, engine.paths, drivers.world)
    if notice is not None:
        engine.note(notice.text, level=notice.level)
    base = prepare_workspace(engine.loaded, engine.paths, drivers.world, shell)
    refuse_unstartable_agent(drivers.backend, engine.agent_env, engine.paths.workspace)
    identity = run_identity(
        engine.loaded,
        base,
        engine.workflow.artifact if engine.workflow else None,
        services=engine.service_resolution,
    )
    engine.log.emit(wire.Identity(identity=identity, base_commit=base))
    token = drivers.world.snapshot("crucible: baseline")
    segment = Segment(
        regime="", fingerprint=fingerprint(engine.goal, drivers.judge.gate, ""), best_token=token
    )
    run = Run(segment=segment, started=started)
    engine.emit_segment(run, reason="start")
    engine.gates.publish(run)
    if engine.lifecycle is not None:
        engine.lifecycle.run_start()
    return run


def _resume(
    engine: Engine, shell: Shell, folded: Folded, started: float, recorded: RecordedKept | None
) -> tuple[Run, LoopExit | None]:
    """Continue a recorded run: classify its end, roll back a half-made turn, re-arm what is owed.

    The world's own record of kept states wins over the log: a state it kept that the log
    never recorded opens a new segment there (measured again as its baseline), so the
    rollback never goes past it.
    """
    recovery = classify(folded)
    engine.note(
        f"resuming after {folded.events} events: iteration {folded.iteration}, best {folded.best_score}, "
        f"${folded.spent:.4f} spent, {folded.active_s:.1f}s active"
    )
    engine.log.emit(recovery.to_event())
    if folded.fingerprint is None:
        # died in setup, before the baseline snapshot (refuse_disagreeing_log proved the log
        # holds no identity and no row): nothing kept yet, so set up again
        _discard_half_made_workspace(engine)
        run = _fresh(engine, shell, started)
        return run, run_baseline(engine, run)
    engine.phase("starting", folded.iteration)
    original = folded.identity
    base = _base_commit(original)
    identity = run_identity(
        engine.loaded,
        base,
        engine.workflow.artifact if engine.workflow else None,
        services=engine.service_resolution,
    )
    engine.log.emit(wire.Identity(identity=identity, base_commit=base, resumed=True))
    if original is not None and original.identity.digest != identity.digest:
        changed = identity.differing(original.identity)
        engine.note(
            "RUN IDENTITY CHANGED since the run started "
            f"({', '.join(changed) or 'the digest format'} differ): scores before and after this resume "
            "may not be comparable",
            level="warn",
        )
        if "services" in changed:
            engine.note(_services_changed(original.identity, identity), level="warn")
    run = run_from_fold(folded, started)
    engine.world.recover()  # a SIGKILL mid-snapshot can leave a lock behind
    swept = sweep_forks(engine.world, RoundFiles(engine.paths.private_dir).forks)
    if swept:
        engine.note(f"removed {len(swept)} wide-round worktree(s) the killed process left behind")
    unlogged = unlogged_keep(folded, recorded.latest if recorded is not None else None)
    if unlogged is not None:
        _adopt_unlogged_keep(engine, run, unlogged)
    if run.segment.best_token:
        engine.world.restore(run.segment.best_token)  # roll a half-finished turn back to the last kept state
    else:
        # a log that names no snapshot (crucible's own, before its first keep): leave the world as it is
        engine.note("the log names no kept snapshot to restore; the workspace is used as it stands", "warn")
    _rearm_wait(engine, run, folded)
    rearm(engine.gates)
    engine.budget_event(run)  # views continue the run's clock and caps from here, not from zero
    if engine.gates.paused:
        engine.note("the operator's pause is still in force: parked until `crucible unpause`")
    engine.gates.publish(run)
    if engine.lifecycle is not None:
        engine.lifecycle.run_start()
    if not folded.segment_baselined or unlogged is not None:
        return run, run_baseline(engine, run)
    engine.write_results(run)
    return run, None


def _adopt_unlogged_keep(engine: Engine, run: Run, kept: str) -> None:
    """Continue from a state the world kept but the log never recorded: a new segment starts
    there and is measured again as its baseline (the log has no score for it)."""
    old = run.segment
    engine.note(
        f"the engine's own record kept {kept[:12]} after the last state the session log names "
        f"({old.best_token[:12]}): the log lost its tail, or the previous process died between "
        f"keeping it and logging it. Nothing kept is rolled back: segment {old.index + 1} starts "
        f"from {kept[:12]} and measures it again as its baseline (iterations and spend count from "
        f"iteration {run.iteration}, where the log ends)",
        level="warn",
    )
    run.segment = Segment(
        regime=old.regime, fingerprint=old.fingerprint, best_token=kept, index=old.index + 1
    )
    engine.emit_segment(run, reason="recovered")


def _services_changed(before: wire.RunIdentity, now: wire.RunIdentity) -> str:
    """Which services resolve differently now (another catalog entry, version or executable)."""
    old = {s.name: s.digest for s in before.services}
    new = {s.name: s.digest for s in now.services}
    names = sorted(name for name in old.keys() | new.keys() if old.get(name) != new.get(name))
    return (
        f"service(s) {', '.join(names)} resolve differently than when the run started: "
        "this process runs the new resolution (recorded in the identity line above), never the old one"
    )


def _rearm_wait(engine: Engine, run: Run, folded: Folded) -> None:
    """Re-register a dangling approval wait with the park time it already used, unless it was a
    distress whose marker is gone (answered while the run was down: close the bracket instead)."""
    wait = folded.open_wait
    if wait is None:
        return
    gates = engine.gates
    run.pending = pending = Pending.from_wire(wait)
    gates.wait_spent = folded.open_wait_parked_s
    if distress.resume_rearms(wait, gates.distress_marker_present()) is False:
        gates.resolve_granted(run, "the distress marker was gone when the run resumed")
        return
    engine.note(
        f"re-registered the outstanding approval {pending.handle or pending.trace_id} "
        f"(already parked {folded.open_wait_parked_s:.1f}s)"
    )


def _base_commit(identity: wire.Identity | None) -> str:
    if identity is None:
        return ""
    if identity.base_commit:
        return identity.base_commit
    components = identity.identity.components
    return components[0].base_sha if components else ""


def refuse_disagreeing_log(folded: Folded, paths: RunPaths, recorded: RecordedKept | None = None) -> None:
    """Stop a resume whose log and world disagree, before anything is written or removed.

    A log without a readable segment normally means setup was interrupted (nothing kept yet,
    so the half-made workspace may be set up again). But when the same log also holds an
    identity or a decided row, or the world's own record kept a state after setup, setup did
    finish: the segment line was damaged or the log was cut short, and the workspace holds
    kept commits. Refuse and leave both.
    """
    if folded.fingerprint is not None:
        return
    evidence = []
    if folded.identity is not None:
        evidence.append("an identity line")
    if folded.rows:
        evidence.append(f"{len(folded.rows)} row(s)")
    if folded.start is None:
        evidence.append("no start line (its beginning is missing)")
    if recorded is not None and recorded.latest != recorded.setup:
        evidence.append(f"the engine's own record kept {recorded.latest[:12]} after setup")
    if not evidence:
        return
    raise ResumeConflict(
        f"{paths.session_log} has no readable segment line but {', '.join(evidence)}: the log is damaged "
        f"or was truncated, and the workspace {paths.workspace} may hold kept history, so nothing was changed",
        hint="restore the session log from a copy, or move the workspace and state directory aside and start afresh",
    )


def refuse_nothing_to_resume(loaded: LoadedManifest, paths: RunPaths) -> None:
    """A resume with no log to continue from; the next step depends on what is left."""
    if workspace_in_use(paths.workspace) and not loaded.inside_workspace():
        raise ResumeConflict(
            f"nothing to resume: {paths.session_log} is missing or holds no events, but the workspace "
            f"{paths.workspace} is still there (its git history holds what the run kept)",
            hint="a run cannot continue without its log: put a copy of the log back and resume, or "
            "move the workspace aside (it keeps its history) and start afresh without --resume",
        )
    raise WorkspaceError(
        f"nothing to resume: {paths.session_log} is missing or holds no events",
        hint="start the run without --resume",
    )


def _loop_exit(outcome: str) -> LoopExit:
    try:
        return LoopExit(outcome)
    except ValueError:  # an outcome of crucible's vocabulary this engine has no exit for
        return LoopExit.FINISHED


def _discard_half_made_workspace(engine: Engine) -> None:
    workspace = engine.paths.workspace
    if engine.loaded.inside_workspace() or not workspace.exists():
        return
    # The log's start line proves the workspace did not exist before this run (a fresh run
    # refuses an existing one), so what is there is our own unfinished setup.
    engine.note(f"removing the workspace a setup interrupted at {workspace}", level="warn")
    shutil.rmtree(workspace)


def run_from_fold(f: Folded, started: float) -> Run:
    segment = Segment(
        regime=f.regime,
        fingerprint=f.fingerprint or "",
        best_token=f.best_token or "",
        baseline_score=f.baseline_score,
        baseline_total=f.baseline_total,
        best=Best(f.best_score, f.best_tiebreak),
        index=max(0, f.segment_index),
        noise_margin=f.noise_margin,
    )
    return Run(
        segment=segment,
        iteration=f.iteration,
        spent=f.spent,
        kept=f.kept,
        discarded=f.discarded,
        kept_shas=list(f.kept_shas),
        solved=f.solved,
        parked_total=f.parked_s,
        parked_before=f.parked_s,
        active_before=f.active_s,
        started=started,
        rows=list(f.rows),
    )


def resumed_budget(given: Budget, f: Folded, changes: Iterable[Mapping[str, Any]] = ()) -> Budget:
    """The budget a resume runs under: the original start's caps, then every budget change the
    operator made (in ledger order, earlier resumes' flags among them), then the resume's own
    flags, which win over all of them."""
    start = f.start
    if start is None:
        original: dict[str, Any] = {}
    elif start.budget is not None:
        original = start.budget
    else:  # a crucible-written start: 0 means no cap
        original = {
            "iterations": start.iters_total or None,
            "max_cost": start.max_cost or None,
            "max_time": float(start.max_secs) if start.max_secs else None,
        }
    return layered_budget(original, *changes, given.to_wire())


def record_resume_budget(ledger: Ledger, given: Budget, note: Callable[[str, str], None]) -> None:
    """Record the budget flags given to a resume in the ledger, settled at once, so that a later
    resume without flags still keeps them (a note says so when the ledger cannot be written)."""
    flags = {name: value for name, value in given.to_wire().items() if value is not None}
    if not flags:
        return
    try:
        entry = ledger.admit(orders.SET_BUDGET, flags).entry
    except OSError as exc:
        note(
            f"the resume's budget flags could not be recorded in the admission ledger ({exc}): "
            "they hold for this process; give them again to a later resume",
            "warn",
        )
        return
    ledger.settle(entry.key, "applied", "the budget flags given to `crucible run --resume`")


def already_ended(f: Folded, budget: Budget, *, no_early_stop: bool = False) -> str | None:
    """Why resuming has nothing to do, or None when the resume should continue the run.

    A run that ended on its budget continues once the budget has room again. A run that ended
    solved continues only with --no-early-stop (without it, the next reading would stop it at
    once) and then, like any other, only while the budget has room.
    """
    shutdown = f.trailing_shutdown
    if shutdown is None or shutdown.outcome not in FINAL_OUTCOMES:
        return None
    if shutdown.outcome == "solved" and not no_early_stop:
        return (
            f"the run already ended: solved at iteration {f.iteration} (best {f.best_score}); "
            "to keep improving past solved, resume with --no-early-stop and a budget with room "
            f"(e.g. --no-early-stop --iterations {f.iteration + 5})"
        )
    why = budget.exhausted(iterations_done=f.iteration, spent=f.spent, active_seconds=f.active_s)
    if why is None:
        return None
    return (
        f"the run already ended ({why}); raise the budget to continue it "
        f"(e.g. --iterations {f.iteration + 5})"
    )


def rearm(gates: Gates) -> None:
    """Re-arm what the ledger says is owed and close out what this resume overrides (C-LEDGER).

    The budget changes are already in the resumed budget (`resumed_budget`); here they are settled.
    """
    ledger = gates.ledger
    if ledger is None:
        return
    level = ledger.latest(orders.PAUSE_LEVEL)
    gates.paused = level is not None and level.input == orders.PAUSE
    for entry in ledger.owed():
        spec = orders.BY_NAME.get(entry.input)
        on_resume = spec.on_resume if spec is not None else orders.OnResume.OVERRIDE
        if on_resume is orders.OnResume.OVERRIDE:
            ledger.settle(entry.key, "superseded", "a resume overrides it")
        elif on_resume is orders.OnResume.REDELIVER:
            gates.inbox.put(Order(entry.key, entry.input, entry.payload))
        elif on_resume is orders.OnResume.LEVEL:
            if entry is level:
                ledger.settle(entry.key, "applied", "re-armed on resume")
            else:
                ledger.settle(entry.key, "superseded", "a later pause or resume overrides it")
        else:  # REAPPLY: already folded into the resumed budget
            ledger.settle(entry.key, "applied", "re-armed on resume")


class _AbortSignal:
    """An abort from the bridge thread interrupts the main thread's running child via SIGUSR1.

    The handler raises only while a child runs (a turn or a measure); anywhere else the loop
    notices the abort at its next step boundary, so no bookkeeping is cut in half.
    """

    def __init__(self, gates: Gates) -> None:
        self.gates = gates
        self.previous: Any = None
        self.installed = False

    def __enter__(self) -> _AbortSignal:
        try:
            self.previous = signal.signal(signal.SIGUSR1, self.handle)
        except ValueError:  # not the main thread (an embedding caller): aborts wait for a step boundary
            return self
        self.installed = True
        self.gates.inbox.on_abort = lambda: os.kill(os.getpid(), signal.SIGUSR1)
        return self

    def handle(self, _signum: int, _frame: Any) -> None:
        if self.gates.interruptible and self.gates.inbox.abort_requested:
            raise Aborted

    def __exit__(self, *exc: object) -> None:
        self.gates.inbox.on_abort = None
        if self.installed:
            signal.signal(signal.SIGUSR1, self.previous)


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


def _restore_quietly(engine: Engine, run: Run | None) -> None:
    if run is None:
        return
    try:
        engine.world.restore(run.segment.best_token)
    except Exception as exc:  # already failing; say so and keep closing the log
        engine.note(f"could not restore the last kept state: {exc}", level="error")


def _finish(engine: Engine, run: Run | None, exit_: LoopExit, reason: str) -> None:
    log = engine.log
    if run is not None:
        seg = run.segment
        log.emit(
            wire.Summary(
                rows=list(run.rows),
                gate=engine.judge.gate,
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
    engine.phase("finished", run.iteration if run else 0)
    log.emit(wire.Finished(outcome=exit_.value, iterations=run.iteration if run else 0))
    log.emit(wire.Shutdown(outcome=exit_.value, reason=reason))
    log.close()
