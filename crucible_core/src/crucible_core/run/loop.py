"""The keep/discard loop: the Run context, its Segment, the ways a run ends, and one iteration.

The loop body calls only world.snapshot/restore/apply/stage, judge.measure and backend.run_turn;
git, subprocesses and files are behind those drivers and the engine's helpers.
"""

from __future__ import annotations

import enum
import hashlib
import time
from typing import TYPE_CHECKING

import attrs

from crucible_core.contract import wire
from crucible_core.contract.decide import Best, Verdict, advance, decide
from crucible_core.contract.measure_diagnosis import baseline_failure
from crucible_core.contract.noise import noise_margin
from crucible_core.contract.reading import Reading
from crucible_core.errors import ExitCode, RunFailed
from crucible_core.protocols import MeasureContext, Staged, TurnResult
from crucible_core.run.parking import Pending

if TYPE_CHECKING:
    from crucible_core.run.engine import Engine

# Consecutive transport failures (the agent could not even be started or streamed) after which
# the run stops as stalled instead of retrying forever without spending an iteration.
MAX_TRANSPORT_RETRIES = 3


class LoopExit(enum.Enum):
    """Every way a run can end, and the shutdown outcome each is written as."""

    FINISHED = "finished"
    SOLVED = "solved"
    BUDGET = "budget"
    STOPPED = "stopped"
    ESCALATED = "escalated"
    STALLED = "stalled"
    ERROR = "error"

    @property
    def exit_code(self) -> ExitCode:
        return _EXIT_CODES[self]


_EXIT_CODES = {
    LoopExit.FINISHED: ExitCode.OK,
    LoopExit.SOLVED: ExitCode.OK,
    LoopExit.BUDGET: ExitCode.OK,
    LoopExit.STOPPED: ExitCode.STOPPED,
    LoopExit.ESCALATED: ExitCode.ESCALATED,
    LoopExit.STALLED: ExitCode.RUN_FAILED,
    LoopExit.ERROR: ExitCode.RUN_FAILED,
}


def fingerprint(goal: str, objective: str, regime: str) -> str:
    digest = hashlib.sha256(f"{goal}\0{objective}\0{regime}".encode()).hexdigest()
    return f"fp:{digest[:16]}"


@attrs.define
class Segment:
    """Everything a re-scope replaces at once: the goalpost and the best found against it."""

    regime: str
    fingerprint: str
    best_token: str
    baseline_score: float | None = None
    baseline_total: float | None = None
    best: Best = Best()
    index: int = 0  # 0 for the run's first segment; each re-scope opens the next
    noise_margin: float = 0.0  # `[judge].noise = "auto"`: the baseline's spread a keep must clear

    def adopt(self, reading: Reading, verdict: Verdict) -> None:
        """Move the goalposts for a kept reading; the first valid one also sets the baseline."""
        if verdict is Verdict.BASELINE:
            self.baseline_score = reading.score
            self.baseline_total = _baseline_total(reading)
        self.best = advance(self.best, reading, verdict)


@attrs.define
class Run:
    """The state threaded through iterations; a resume rebuilds it from the session log."""

    segment: Segment
    iteration: int = 0  # the last iteration that completed; 0 is the baseline
    spent: float = 0.0
    kept: int = 0
    discarded: int = 0
    kept_shas: list[str] = attrs.field(factory=list)
    solved: bool = False
    parked_total: float = 0.0  # parked seconds over the whole run, earlier processes included
    parked_before: float = 0.0  # the part of parked_total earlier processes spent
    active_before: float = 0.0  # active seconds carried over from earlier processes (parks excluded)
    started: float = attrs.field(factory=time.monotonic)
    rows: list[wire.RowWire] = attrs.field(factory=list)
    transport_failures: int = 0
    pending: Pending | None = None  # an outstanding approval (ADR 0003)

    def active_seconds(self) -> float:
        # active_before is already net of earlier parks: subtract only this process's
        return (
            self.active_before + (time.monotonic() - self.started) - (self.parked_total - self.parked_before)
        )


@attrs.frozen
class Measured:
    """An iteration whose candidate was applied and measured: only this can be decided."""

    iteration: int
    reading: Reading
    turn: TurnResult | None


def measure_context(run: Run, iteration: int) -> MeasureContext:
    seg = run.segment
    return MeasureContext(
        iteration=iteration,
        baseline_score=seg.baseline_score,
        baseline_total=seg.baseline_total,
        best_score=seg.best.score,
    )


def _baseline_total(reading: Reading) -> float | None:
    total = (reading.detail or {}).get("total")
    return float(total) if isinstance(total, int | float) and not isinstance(total, bool) else None


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


def run_baseline(engine: Engine, run: Run) -> LoopExit | None:
    """Measure the segment's starting state and record its first row.

    Iteration 0 for the run's first segment; a re-scope re-baselines at the current
    iteration, which does not spend one.
    """
    at = run.iteration
    token = run.segment.best_token
    engine.phase("baseline", at)
    if not engine.judge.scored:
        engine.row(
            run,
            iteration=at,
            verdict="baseline-skipped",
            reading=None,
            token=token,
            note="task lane: no baseline",
        )
        return None
    staged = stage_for_measure(engine, at)
    reading = Reading.invalid(staged.refused) if staged.refused else measure_staged(engine, run, at, staged)
    if not reading.valid:
        engine.world.restore(token)  # whatever the measure left behind is not the kept state
    verdict = decide(reading, Best(), engine.direction, engine.tiebreak_direction)
    if verdict is Verdict.BASELINE:
        run.segment.adopt(reading, verdict)
        judge = engine.loaded.manifest.judge
        if judge is not None and judge.noise == "auto":
            run.segment.noise_margin = noise_margin(reading.samples)
    engine.row(
        run,
        iteration=at,
        verdict="baseline" if reading.scoreable else "invalid",
        reading=reading,
        token=token,
    )
    if not reading.scoreable and run.segment.index == 0:
        # With no valid baseline every candidate would be discarded: stop before spending a turn.
        raise RunFailed(
            baseline_failure(reading), hint="`crucible check` shows the measure's exit code and stderr"
        )
    if reading.scoreable and reading.solved and not engine.options.no_early_stop:
        run.solved = True
        return LoopExit.SOLVED
    return None


def reject(engine: Engine, run: Run, iteration: int, why: str, turn: TurnResult | None = None) -> None:
    """Discard a candidate that never got a valid reading: roll back and record why."""
    engine.world.restore(run.segment.best_token)
    engine.row(run, iteration=iteration, verdict="discard", reading=Reading.invalid(why), turn=turn)


def run_iteration(engine: Engine, run: Run) -> LoopExit | None:
    """One propose -> apply -> measure -> decide step; returns an exit when the run must end."""
    iteration = run.iteration + 1
    engine.phase("iteration", iteration)
    turn = engine.propose(run, iteration)
    run.spent += turn.cost_usd
    if turn.transport_failure:
        engine.world.restore(run.segment.best_token)
        run.transport_failures += 1
        engine.note(f"iteration {iteration}: agent transport failed ({turn.note}); not counted, retrying")
        if run.transport_failures >= MAX_TRANSPORT_RETRIES:
            engine.note(f"{run.transport_failures} transport failures in a row; giving up")
            return LoopExit.STALLED
        return None
    run.transport_failures = 0
    escalated = engine.after_turn(run, iteration)
    if escalated is not None:
        return escalated
    if not turn.ok:
        reject(engine, run, iteration, f"agent turn failed ({turn.failure}): {turn.note}", turn)
        return None
    engine.step("apply", iteration)
    applied = engine.world.apply()
    if not applied.ok:
        reject(engine, run, iteration, f"apply failed: {applied.note}", turn)
        return None
    staged = stage_for_measure(engine, iteration)
    if staged.refused:
        reject(engine, run, iteration, staged.refused, turn)
        return None
    if staged.unchanged:
        # Nothing to judge: measuring the kept state again could only "win" on noise.
        reject(engine, run, iteration, NO_CHANGE, turn)
        return None
    rejected = engine.candidate_preflight(iteration)
    if rejected is not None:
        reject(engine, run, iteration, rejected, turn)
        return None
    if engine.has_candidate_rungs:
        # what the rungs left in the workspace (a build's outputs) is part of what is measured
        staged = stage_for_measure(engine, iteration)
        if staged.refused:
            reject(engine, run, iteration, staged.refused, turn)
            return None
    measured = Measured(iteration, measure_staged(engine, run, iteration, staged), turn)
    return settle(engine, run, measured)


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
    if verdict is Verdict.DISCARD:
        engine.world.restore(seg.best_token)
    else:
        before = engine.world.last_commit_sha()
        token = engine.snapshot(f"crucible: iteration {measured.iteration} ({reading.note or 'kept'})")
        sha = engine.world.last_commit_sha()
        if sha == before or sha in run.kept_shas:
            # No new commit (a world whose change lies outside its files, or an agent that moved
            # HEAD back to an earlier kept commit): kept_shas lists each kept commit once.
            sha = None
        seg.best_token = token
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
    )
    if verdict is not Verdict.DISCARD and engine.judge.scored and reading.solved:
        run.solved = True
        if not engine.options.no_early_stop:
            return LoopExit.SOLVED
    return None


def run_loop(engine: Engine, run: Run) -> LoopExit:
    """The cyclic shell: gates at each iteration head, then one typed iteration."""
    while True:
        gate = engine.iteration_head(run)
        if gate is not None:
            return gate
        why = engine.budget.exhausted(
            iterations_done=run.iteration, spent=run.spent, active_seconds=run.active_seconds()
        )
        if why is not None:
            engine.note(f"stopping: {why}")
            iterations_only = why.startswith("iterations")
            return LoopExit.FINISHED if iterations_only else LoopExit.BUDGET
        ended = run_iteration(engine, run)
        if ended is not None:
            return ended
