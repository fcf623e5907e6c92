"""The keep/discard loop: one iteration as a plan of engine operations, and the cyclic shell around it.

The loop body calls only world.snapshot/restore/apply/stage, judge.measure and backend.run_turn;
git, subprocesses and files are behind those drivers and the engine's helpers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.contract.decide import Best, Verdict, decide
from crucible_core.contract.noise import noise_margin
from crucible_core.contract.reading import Reading
from crucible_core.errors import RunFailed
from crucible_core.run.context import LoopExit, Run, Segment, fingerprint, measure_context
from crucible_core.run.iteration import run_iteration_graph
from crucible_core.run.steps import measure_staged, reject, stage_for_measure

if TYPE_CHECKING:
    from crucible_core.run.engine import Engine

__all__ = [
    "LoopExit",
    "Run",
    "Segment",
    "fingerprint",
    "measure_context",
    "reject",
    "run_baseline",
    "run_loop",
]


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
        from crucible_core.contract.measure_diagnosis import baseline_failure  # only on this way out

        raise RunFailed(
            baseline_failure(reading), hint="`crucible check` shows the measure's exit code and stderr"
        )
    if reading.scoreable and reading.solved and not engine.options.no_early_stop:
        run.solved = True
        return LoopExit.SOLVED
    return None


def run_iteration(engine: Engine, run: Run) -> LoopExit | None:
    """One propose -> apply -> measure -> decide step, run as the iteration graph on the plan
    executor (run/iteration.py); returns an exit when the run must end."""
    iteration = run.iteration + 1
    engine.phase("iteration", iteration)
    return run_iteration_graph(engine, run, iteration)


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
