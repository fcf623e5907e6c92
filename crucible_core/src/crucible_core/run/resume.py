"""Resuming a loop run: what the recorded log allows, the budget it continues under, what is still owed.

Everything here decides before the new process writes a line (or, for `rearm`, re-arms the
gates from the admission ledger once the engine exists). The kept record is the truth about
kept history: a log that disagrees with it, or a log that is gone, refuses the resume.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from crucible_core.contract.decide import Best
from crucible_core.contract.fold import Folded
from crucible_core.contract.recovery import FINAL_OUTCOMES
from crucible_core.control import orders
from crucible_core.control.inbox import Order
from crucible_core.control.ledger import Ledger
from crucible_core.errors import ResumeConflict, WorkspaceError
from crucible_core.manifest.loader import LoadedManifest
from crucible_core.manifest.paths import RunPaths
from crucible_core.protocols import RecordedKept
from crucible_core.run.budget import Budget, layered_budget
from crucible_core.run.context import LoopExit, Run, Segment
from crucible_core.run.gates import Gates
from crucible_core.run.workspace_setup import workspace_in_use


def refuse_disagreeing_log(folded: Folded, paths: RunPaths, recorded: RecordedKept | None = None) -> None:
    """Stop a resume whose log and world disagree, before anything is written or removed.

    A log without a readable segment normally means setup was interrupted (nothing kept yet,
    so the half-made workspace may be set up again). But when the same log also holds a
    decided row or an identity a resume wrote, or the world's own record kept a state after
    setup, setup did finish: the segment line was damaged or the log was cut short, and the
    workspace may hold kept commits. Refuse and leave both. A first process's identity line is
    no such evidence: it is written before the baseline snapshot and the segment line, so a
    kill between them leaves it alone, with nothing kept.
    """
    if folded.fingerprint is not None:
        return
    evidence = []
    if folded.resumed_identity:
        evidence.append("an identity line a resume wrote")
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


def loop_exit(outcome: str) -> LoopExit:
    try:
        return LoopExit(outcome)
    except ValueError:  # an outcome of crucible's vocabulary this engine has no exit for
        return LoopExit.FINISHED


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
