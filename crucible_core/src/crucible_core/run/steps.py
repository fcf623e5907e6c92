"""The steps of an iteration the loop and its graph share: stage, measure, reject, settle.

Each calls only world and judge operations (through the engine) and the pure decide rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.contract.change_evidence import NO_EVIDENCE
from crucible_core.contract.decide import Verdict, decide
from crucible_core.contract.noise import note_with_margin
from crucible_core.contract.reading import Reading
from crucible_core.protocols import Staged, TurnResult
from crucible_core.run.context import LoopExit, Measured, Run

if TYPE_CHECKING:
    from crucible_core.run.engine import Engine

NO_CHANGE = "no change"


def stage_for_measure(engine: Engine, iteration: int) -> Staged:
    """Put the frozen injects back, then name the candidate that is about to be measured."""
    engine.refresh_injects(iteration)
    return engine.world.stage()


def measure_staged(engine: Engine, run: Run, iteration: int, staged: Staged) -> Reading:
    """Measure, then put the candidate back as it was staged: what is kept is what was measured.

    A measure's side effects on the workspace (build output such as `__pycache__/`, an edited
    file) are rolled back rather than kept; a measure that damages the world gives no reading.
    """
    reading = engine.measure(run, iteration)
    after = engine.world.stage()
    if after.refused:
        return Reading.invalid(f"the measure damaged the workspace: {after.refused}")
    if after.token != staged.token:
        engine.world.put_back_staged(staged.token)
    return reading


def reject(
    engine: Engine,
    run: Run,
    iteration: int,
    why: str,
    turn: TurnResult | None = None,
    *,
    describe: bool = True,
) -> None:
    """Discard a candidate that never got a valid reading: roll back and record why.

    The row carries the change the candidate made (read before the rollback), unless `describe`
    is False: a candidate that could not be staged, or that changed nothing, has none to read.
    """
    change = engine.describe_candidate(run.segment.best_token) if describe else NO_EVIDENCE
    engine.world.restore(run.segment.best_token)
    engine.row(
        run, iteration=iteration, verdict="discard", reading=Reading.invalid(why), turn=turn, change=change
    )


def snapshot_keep(engine: Engine, run: Run, message: str) -> tuple[str, str | None]:
    """Commit the kept candidate and make it the segment's best: (token, the new commit or None)."""
    before = engine.world.last_commit_sha()
    token = engine.snapshot(message)
    sha = engine.world.last_commit_sha()
    if sha == before or sha in run.kept_shas:
        # No new commit (a world whose change lies outside its files, or an agent that moved
        # HEAD back to an earlier kept commit): kept_shas lists each kept commit once.
        sha = None
    run.segment.best_token = token
    return token, sha


def settle(engine: Engine, run: Run, measured: Measured) -> LoopExit | None:
    """Decide a measured candidate, then keep (snapshot) or discard (restore) and record the row."""
    engine.step("decide", measured.iteration)
    seg = run.segment
    reading = measured.reading
    margin = engine.keep_margin(run) if engine.judge.scored else 0.0
    if not engine.judge.scored:
        verdict = Verdict.KEEP if reading.valid else Verdict.DISCARD
    else:
        verdict = decide(reading, seg.best, engine.direction, engine.tiebreak_direction, margin)
    sha = token = None
    note = None
    # read before the keep or the rollback: the change from the state the candidate was proposed on
    change = engine.describe_candidate(seg.best_token, staged=measured.staged)
    if verdict is Verdict.DISCARD:
        engine.world.restore(seg.best_token)
        # a reader of the log itself sees what the margin asked of the candidate
        note = note_with_margin(
            reading.note, score=reading.score, best=seg.best.score, margin=margin, direction=engine.direction
        )
    else:
        token, sha = snapshot_keep(
            engine, run, f"crucible: iteration {measured.iteration} ({reading.note or 'kept'})"
        )
        if engine.judge.scored:
            seg.adopt(reading, verdict)
    wire_verdict = "discard" if verdict is Verdict.DISCARD else "keep"
    engine.row(
        run,
        iteration=measured.iteration,
        verdict=wire_verdict,
        reading=reading,
        turn=measured.turn,
        sha=sha,
        token=token,
        margin=margin,
        note=note,
        change=change,
    )
    if sha is not None:
        engine.kept(measured.iteration, sha, reading.note)
    if verdict is not Verdict.DISCARD and engine.judge.scored and reading.solved:
        run.solved = True
        if not engine.options.no_early_stop:
            return LoopExit.SOLVED
    return None
