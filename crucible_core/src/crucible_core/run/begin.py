"""How a loop run begins: fresh (workspace, identity, baseline snapshot) or resumed (classify, roll back, re-arm).

Both end where the lifecycle's run start fires, with the Run the loop continues from; the
baseline measure (when one is owed) and the loop follow in the loop lane (lanes/loop.py).
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from crucible_core.contract import wire
from crucible_core.contract.reading import Reading
from crucible_core.errors import PreflightFailed
from crucible_core.protocols import RecordedKept
from crucible_core.run.agent_ready import refuse_unstartable_agent
from crucible_core.run.context import LoopExit, Run, Segment, fingerprint
from crucible_core.run.engine import Engine
from crucible_core.run.identity import run_identity
from crucible_core.run.loop import run_baseline
from crucible_core.run.parking import Pending
from crucible_core.run.workspace_setup import prepare_workspace, source_notice
from crucible_core.shell import Shell

# The log's fold and what a resume reads from it load with the first resume: a fresh run has none.
if TYPE_CHECKING:
    from crucible_core.contract.fold import Folded


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


def begin_fresh(engine: Engine, shell: Shell, started: float) -> Run:
    """A new run: set up the workspace, record the identity, snapshot the baseline, open segment 0."""
    drivers = engine.drivers
    engine.phase("starting", 0)
    notice = source_notice(engine.loaded, engine.paths, drivers.world)
    if notice is not None:
        level, text = notice
        engine.note(text, level=level)
    base = prepare_workspace(engine.loaded, engine.paths, drivers.world, shell)
    refuse_unstartable_agent(drivers.backend, engine.agent_env, engine.paths.workspace)
    identity = run_identity(
        engine.loaded,
        base,
        engine.workflow.artifact if engine.workflow else None,
        services=engine.service_resolution,
        provenance=engine.provenance,
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


def begin_resumed(
    engine: Engine, shell: Shell, folded: Folded, started: float, recorded: RecordedKept | None
) -> tuple[Run, LoopExit | None]:
    """Continue a recorded run: classify its end, roll back a half-made turn, re-arm what is owed.

    The world's own record of kept states wins over the log: a state it kept that the log
    never recorded opens a new segment there (measured again as its baseline), so the
    rollback never goes past it.
    """
    from crucible_core.contract.recovery import classify, unlogged_keep
    from crucible_core.run.resume import rearm, run_from_fold

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
        run = begin_fresh(engine, shell, started)
        return run, run_baseline(engine, run)
    engine.phase("starting", folded.iteration)
    original = folded.identity
    base = _base_commit(original)
    identity = run_identity(
        engine.loaded,
        base,
        engine.workflow.artifact if engine.workflow else None,
        services=engine.service_resolution,
        provenance=engine.provenance,
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
    engine.publish_standing(run)  # status shows the resumed best and counts before the next row
    if engine.gates.paused:
        engine.note("the operator's pause is still in force: parked until `crucible unpause`")
    engine.gates.publish(run)
    if engine.lifecycle is not None:
        engine.lifecycle.run_start()
    if not folded.segment_baselined or unlogged is not None:
        return run, run_baseline(engine, run)
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
    """Re-register a dangling approval wait with the park time it already used, unless it was an
    agent's suspend its plugin no longer holds (answered while the run was down, or the state
    rebuilt clean: close the bracket instead, and the run goes on)."""
    wait = folded.open_wait
    if wait is None:
        return
    gates = engine.gates
    run.pending = pending = Pending.from_wire(wait)
    gates.wait_spent = folded.open_wait_parked_s
    owner = gates.suspended_by(run)
    if owner is not None and not owner.held(engine.signal_context):
        gates.resolve_granted(run, f"the {owner.handle} marker was gone when the run resumed")
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


def _discard_half_made_workspace(engine: Engine) -> None:
    workspace = engine.paths.workspace
    if engine.loaded.inside_workspace() or not workspace.exists():
        return
    # The log's start line proves the workspace did not exist before this run (a fresh run
    # refuses an existing one), so what is there is our own unfinished setup.
    engine.note(f"removing the workspace a setup interrupted at {workspace}", level="warn")
    shutil.rmtree(workspace)
