"""One iteration on the plan executor: the engine operations of the iteration graph, lent to it.

The loop shell hands the executor the graph from plan/iteration.py and an `IterationOperations`
(the `EngineOperations` the engine kinds call). Each operation runs in-process, on the loop's
own thread (the executor's inline mode), and does what the loop did before it was a graph:
rows, rollbacks and the loop exits are the same. A step that has nothing left to do (a failed
turn, an unchanged candidate) settles `fail` or `skipped`, and the executor blocks the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from crucible_core.contract.reading import Reading
from crucible_core.plan.executor import ExecutorConfig, PlanExecutor
from crucible_core.plan.iteration import admitted_iteration_plan, core_kinds
from crucible_core.plan.kinds import Attempt, Outcome, TaskContext
from crucible_core.plan.output import finite_score
from crucible_core.protocols import Staged, TurnResult
from crucible_core.run.context import MAX_TRANSPORT_RETRIES, LoopExit, Measured, Run
from crucible_core.run.steps import NO_CHANGE, measure_staged, reject, settle, stage_for_measure

if TYPE_CHECKING:
    from crucible_core.run.engine import Engine


class IterationOperations:
    """The engine operations of one iteration, carrying what each step hands the next."""

    def __init__(self, engine: Engine, run: Run, iteration: int) -> None:
        self.engine = engine
        self.run = run
        self.iteration = iteration
        self.exit: LoopExit | None = None
        self.error: Exception | None = None  # a RunFailed (say) re-raised once the graph settled
        self.turn: TurnResult | None = None
        self.staged: Staged | None = None
        self.measured: Measured | None = None

    def run_operation(self, op: str, context: TaskContext) -> Attempt:
        step: Callable[[], Attempt] | None = (
            (lambda: self._grade(context)) if op == "grade" else getattr(self, f"_{op}", None)
        )
        if step is None:
            return Attempt(Outcome.FAIL, note=f"the default loop has no {op} operation")
        try:
            return step()
        except Exception as exc:  # the executor would settle it as a task failure: the run must fail
            self.error = exc
            return Attempt(Outcome.FAIL, note=f"{type(exc).__name__}: {exc}")

    # -- the operations ---------------------------------------------------------------------
    def _propose(self) -> Attempt:
        engine, run, iteration = self.engine, self.run, self.iteration
        turn = self.turn = engine.propose(run, iteration)
        run.spent += turn.cost_usd  # the loop shell's budget owns spend (the graph's is 0)
        if turn.transport_failure:
            engine.world.restore(run.segment.best_token)
            run.transport_failures += 1
            engine.note(f"iteration {iteration}: agent transport failed ({turn.note}); not counted, retrying")
            if run.transport_failures >= MAX_TRANSPORT_RETRIES:
                engine.note(f"{run.transport_failures} transport failures in a row; giving up")
                self.exit = LoopExit.STALLED
            return Attempt(Outcome.TRANSPORT, note=turn.note, transport="agent")
        run.transport_failures = 0
        escalated = engine.after_turn(run, iteration)
        if escalated is not None:
            self.exit = escalated
            return Attempt(Outcome.FAIL, note="escalated")
        if not turn.ok:
            reject(engine, run, iteration, f"agent turn failed ({turn.failure}): {turn.note}", turn)
            return Attempt(Outcome.FAIL, note=turn.note)
        return Attempt(Outcome.PASS)

    def _apply(self) -> Attempt:
        engine = self.engine
        engine.step("apply", self.iteration)
        applied = engine.world.apply()
        if not applied.ok:
            reject(engine, self.run, self.iteration, f"apply failed: {applied.note}", self.turn)
            return Attempt(Outcome.FAIL, note=applied.note)
        return Attempt(Outcome.PASS)

    def _stage_candidate(self) -> Staged | Attempt:
        """The staged candidate, or the attempt that settles the step when there is none to judge."""
        engine, run, iteration = self.engine, self.run, self.iteration
        staged = stage_for_measure(engine, iteration)
        if staged.refused:
            reject(engine, run, iteration, staged.refused, self.turn, describe=False)
            return Attempt(Outcome.FAIL, note=staged.refused)
        if staged.unchanged and engine.judge.scored:
            # Nothing to judge: measuring the kept state again could only "win" on noise. (The
            # task lane keeps every completed turn, a turn that changed nothing included.)
            reject(engine, run, iteration, NO_CHANGE, self.turn, describe=False)
            return Attempt(Outcome.SKIPPED, note=NO_CHANGE)
        return staged

    def _measure(self) -> Attempt:
        engine, run, iteration = self.engine, self.run, self.iteration
        staged = self._stage_candidate()
        if isinstance(staged, Attempt):
            return staged
        rejected = engine.candidate_preflight(iteration)
        if rejected is not None:
            reject(engine, run, iteration, rejected, self.turn)
            return Attempt(Outcome.FAIL, note=rejected)
        if engine.has_candidate_rungs:
            # what the rungs left in the workspace (a build's outputs) is part of what is measured
            staged = stage_for_measure(engine, iteration)
            if staged.refused:
                reject(engine, run, iteration, staged.refused, self.turn, describe=False)
                return Attempt(Outcome.FAIL, note=staged.refused)
        reading = measure_staged(engine, run, iteration, staged)
        # A valid reading means the measure's re-stage was clean and the workspace is `staged`
        # again: the decision can describe that token without staging (and checking) once more.
        self.measured = Measured(
            iteration, reading, self.turn, staged=staged.token if reading.valid else None
        )
        return Attempt(Outcome.PASS, metric=reading.score if reading.valid else None)

    def _grade(self, context: TaskContext) -> Attempt:
        """An authored graph's measurement: the score its `score` task reported, on the staged
        candidate. Evidence that did not pass never gets here (the grade is blocked, and the
        iteration is discarded as unscoreable)."""
        engine, iteration = self.engine, self.iteration
        engine.step("grade", iteration)
        staged = self._stage_candidate()
        if isinstance(staged, Attempt):
            return staged
        reading = graded_reading(context)
        self.measured = Measured(iteration, reading, self.turn)
        return Attempt(Outcome.PASS, metric=reading.score if reading.valid else None)

    def _decide(self) -> Attempt:
        assert self.measured is not None
        self.exit = settle(self.engine, self.run, self.measured)
        return Attempt(Outcome.PASS)


def graded_reading(context: TaskContext) -> Reading:
    """A grade's reading: its `score` task's finite score (and its `tiebreak` task's), from inputs."""
    fields = context.task.fields
    if fields.source is None:
        return Reading.invalid("grade() names no score task")
    if fields.source not in context.inputs:
        return Reading.invalid(f"grade() score task {fields.source!r} is not among its evidence")
    output = context.inputs[fields.source]
    score = finite_score(output)
    if score is None:
        return Reading.invalid(f"grade() score task {fields.source!r} reported no finite score")
    tiebreak = finite_score(context.inputs.get(fields.tiebreak)) if fields.tiebreak else None
    solved = isinstance(output, dict) and output.get("solved") is True
    return Reading(
        valid=True, score=score, tiebreak=tiebreak, solved=solved, note=f"graded by {fields.source}"
    )


def run_iteration_graph(engine: Engine, run: Run, iteration: int) -> LoopExit | None:
    """Execute the iteration graph for `iteration`; the loop exit it produced, if any."""
    if engine.workflow is not None:  # the pack authored its own graph (run/workflow_iteration.py)
        return engine.workflow.run_iteration(engine, run, iteration)
    operations = IterationOperations(engine, run, iteration)
    config = ExecutorConfig(
        workspace=engine.paths.workspace,
        state_dir=engine.paths.private_dir,
        jobs=1,
        engine=operations,
        env={},
        iteration=iteration,
        inline=True,
        record=False,
    )
    PlanExecutor(admitted_iteration_plan(), core_kinds(), engine.log, config).run()
    if operations.error is not None:
        raise operations.error
    return operations.exit
