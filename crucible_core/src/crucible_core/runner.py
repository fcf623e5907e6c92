"""Running one crucible run end to end: open the log, set up, baseline, loop, and shut down exactly once."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from crucible_core import __version__
from crucible_core.budget import Budget
from crucible_core.drivers import build_drivers
from crucible_core.engine import Engine, RunOptions, agent_environment, engine_environment
from crucible_core.errors import CrucibleError, ExitCode, WorkspaceError
from crucible_core.identity import component_hashes, run_identity
from crucible_core.loop import LoopExit, Run, Segment, fingerprint, run_baseline, run_loop
from crucible_core.manifest.loader import LoadedManifest, load_manifest
from crucible_core.paths import RunPaths
from crucible_core.plugins import Plugins
from crucible_core.prompt import DEFAULT_METHOD
from crucible_core.protocols import Reporter, ReporterContext
from crucible_core.redact import Redactor
from crucible_core.session_log import SessionLog
from crucible_core.shell import Shell
from crucible_core.workspace_setup import prepare_workspace, refuse_existing_workspace


@attrs.frozen
class RunRequest:
    manifest: Path
    budget: Budget
    options: RunOptions = RunOptions()
    state_dir: Path | None = None
    steer: Path | None = None
    ui: str = "console"
    resume: bool = False


@attrs.frozen
class RunResult:
    exit: LoopExit
    reason: str
    exit_code: ExitCode


def load_for_run(plugins: Plugins, manifest: Path) -> LoadedManifest:
    def read_pristine(workspace: Path, relpath: str) -> bytes | None:
        return plugins.hook.crucible_read_pristine(workspace=workspace, relpath=relpath)

    return load_manifest(manifest, read_pristine=read_pristine)


def make_reporter(plugins: Plugins, name: str, iterations: int | None) -> Reporter:
    factory: Any = plugins.registry("reporter").get(name, where="--ui")
    return factory(ReporterContext(stream=sys.stderr, iterations=iterations))


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
        if self.count > 1:
            raise KeyboardInterrupt
        self.request_stop(f"received {signal.Signals(signum).name}")

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def execute(plugins: Plugins, request: RunRequest) -> RunResult:
    """Run a manifest; errors before the session log exists propagate as CrucibleError."""
    loaded = load_for_run(plugins, request.manifest)
    paths = RunPaths.resolve(loaded, state_dir=request.state_dir, steer=request.steer)
    if request.resume:
        raise WorkspaceError("--resume is not available in this build", hint="start a fresh run")
    refuse_existing_workspace(loaded, paths)
    paths.ensure_state_dirs()
    shell = Shell(cwd=paths.workspace, env=engine_environment())
    drivers = build_drivers(
        plugins, loaded, paths, shell, harness=request.options.harness, model=request.options.model
    )
    reporter = make_reporter(plugins, request.ui, request.budget.iterations)
    redactor = Redactor()
    agent_env = agent_environment(engine_environment(), loaded)
    redactor.add_env(loaded.manifest.agent.env)
    log = SessionLog(paths.session_log, redactor)
    log.observers.append(reporter.on_event)
    log.observers.append(lambda event: plugins.hook.crucible_session_event(event=event))
    goal = loaded.goal_text()
    m = loaded.manifest
    method = (
        loaded.resolve(m.agent.method_prompt).read_text(encoding="utf-8")
        if m.agent.method_prompt
        else DEFAULT_METHOD
    )
    engine = Engine(
        loaded=loaded,
        paths=paths,
        drivers=drivers,
        log=log,
        budget=request.budget,
        options=request.options,
        redactor=redactor,
        agent_env=agent_env,
        goal=goal,
        method_template=method,
    )
    for warning in loaded.warnings:
        engine.note(warning, level="warn")
    started = time.monotonic()
    exit_, reason = LoopExit.ERROR, "engine error"
    run: Run | None = None
    try:
        with _SignalStop(engine.gates.request_stop):
            log.emit(
                "start",
                version=__version__,
                manifest=str(loaded.path),
                workspace=str(paths.workspace),
                gate=drivers.judge.gate,
                direction=engine.direction.value if drivers.judge.scored else None,
                world=drivers.choice.world,
                judge=drivers.choice.judge,
                backend=drivers.choice.backend,
                harness=drivers.choice.harness,
                model=request.options.model or m.agent.model,
                budget=request.budget.to_wire(),
                resumed=False,
            )
            engine.phase("starting", 0)
            base = prepare_workspace(loaded, paths, drivers.world, shell)
            hashes = component_hashes(loaded, base)
            log.emit("identity", identity=run_identity(hashes), base_commit=base, components=hashes)
            token = drivers.world.snapshot("crucible: baseline")
            segment = Segment(
                regime="", fingerprint=fingerprint(goal, drivers.judge.gate, ""), best_token=token
            )
            run = Run(segment=segment, started=started)
            exit_ = run_baseline(engine, run) or run_loop(engine, run)
            reason = _reason(exit_, run)
    except KeyboardInterrupt:
        exit_, reason = LoopExit.STOPPED, "interrupted twice: aborted"
        _restore_quietly(engine, run)
    except CrucibleError as exc:
        exit_, reason = LoopExit.ERROR, exc.render()
        engine.note(reason, level="error")
        _restore_quietly(engine, run)
    except Exception as exc:  # a plugin bug must still close the log with exactly one shutdown
        exit_, reason = LoopExit.ERROR, f"internal error: {type(exc).__name__}: {exc}"
        engine.note(reason, level="error")
        _restore_quietly(engine, run)
    finally:
        _finish(engine, run, exit_, reason)
        reporter.close()
    return RunResult(exit_, reason, exit_.exit_code)


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
            "summary",
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
    engine.phase("finished", run.iteration if run else 0)
    log.emit("finished", outcome=exit_.value, iterations=run.iteration if run else 0)
    log.emit("shutdown", outcome=exit_.value, reason=reason)
    log.close()
