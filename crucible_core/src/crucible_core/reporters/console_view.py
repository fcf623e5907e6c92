"""What the console knows about a run, folded from the session log's events as they arrive (pure).

The plain and the live console both draw from this one record, so they agree: the iteration
total follows every budget change, elapsed time continues across resumes (it is the run's
active time, from the log's budget events, not this process's clock), parked time does not
count, and the best score's history feeds the end summary's sparkline.
"""

from __future__ import annotations

from typing import Any

import attrs

from crucible_core.contract import wire
from crucible_core.contract.decide import INVALID, shown_decision
from crucible_core.contract.records import value_methods
from crucible_core.contract.run_kind import UNDISPATCHED, RunKind, TaskStanding, run_kind, task_verdict

PARKED_PHASES = frozenset({"paused", "parked", "distressed"})
# The kinds `ConsoleView.apply` folds into the view; any other event only moves its clock.
# The plan's two kinds by their wire names: naming their classes would define every rare kind.
FOLDED_KINDS = frozenset(
    [
        *(
            cls.KIND
            for cls in (wire.Start, wire.Budget, wire.Phase, wire.Step, wire.Row, wire.Summary, wire.Shutdown)
        ),
        "plan_admitted",
        "task_result",
    ]
)


def row_label(row: wire.RowWire) -> str:
    """The decision as the console names it: a reading that was not valid says so."""
    if row.decision == "baseline-skipped":
        return "no-base"  # the task lane: its note says so
    return shown_decision(row.decision, row.valid)


@value_methods
@attrs.define(repr=False, eq=False)
class ConsoleView:
    """The run as the console shows it; `apply` each decoded line in log order."""

    gate: str = ""
    direction: str | None = None
    total: int | None = None  # the iteration cap in force (None: no cap)
    max_cost: float | None = None
    max_time: float | None = None
    iteration: int = 0  # the last decided iteration
    current: int | None = None  # the iteration under way, if any
    phase: str = ""
    step: str = ""
    best: float | None = None
    baseline: float | None = None
    spent: float = 0.0
    kept: int = 0
    discarded: int = 0
    invalid: int = 0
    best_history: list[float | None] = attrs.field(factory=list)  # the best after each deep row
    summary: wire.Summary | None = None
    shutdown: wire.Shutdown | None = None
    resumed: bool = False
    clock_known: bool = True  # False between a resumed start and the budget event that carries the time
    # elapsed = active seconds at `_base_ts`, plus wall time since then unless parked
    _active_base: float = 0.0
    _base_ts: float | None = None
    _parked: bool = False
    last_ts: float | None = None  # the time of the last event folded
    # for the ETA: where this process's stretch of the run began
    _eta_from: tuple[int, float] | None = None
    _widest: int = 1
    _last_decided: float | None = None  # the run's active time when its last iteration was decided
    # a playbook or a plan file (contract/run_kind.py): its tasks stand where a loop's iterations do
    started: bool = False  # a start line was folded (a plan file's log has none)
    kind: RunKind = RunKind.LOOP
    tasks: list[wire.PlanTaskWire] = attrs.field(factory=list)
    task_status: dict[str, str] = attrs.field(factory=dict)

    # -- folding --------------------------------------------------------------------------
    def apply(self, line: wire.Line, now: float) -> None:
        """Fold one event; `now` (wall-clock seconds) stands in for a line without a timestamp."""
        ts = line.ts if line.ts is not None else now
        ev = line.event
        if isinstance(ev, wire.Start):
            self._start(ev, ts)
        elif isinstance(ev, wire.Budget):
            self._rebase(ev.active_s if ev.active_s is not None else float(ev.elapsed_secs), ts)
            self.spent = ev.spent
            if ev.caps is not None:
                self._caps(ev.caps)
            if ev.iterations_done is not None:
                self.iteration = max(self.iteration, ev.iterations_done)
        elif isinstance(ev, wire.Phase):
            self._phase(ev, ts)
        elif isinstance(ev, wire.Step):
            self.step, self.current = ev.step, ev.iter
        elif isinstance(ev, wire.Row):
            self._row(ev.row)
            self._last_decided = self.elapsed(ts)
        elif isinstance(ev, wire.Summary):
            self._summary(ev)
        elif isinstance(ev, wire.Shutdown):
            self.shutdown = ev
        elif ev.KIND in wire.RARE_KINDS:  # asked only of such an event: its class is defined then
            self._plan_event(ev)
        self.passed(ts)

    def _plan_event(self, ev: wire.Event) -> None:
        if isinstance(ev, wire.PlanAdmitted):
            kind = run_kind(started=self.started, gate=self.gate, plan_admitted=True)
            if kind is not RunKind.LOOP:  # a scored workflow's graph is an iteration's, not the run
                self.kind, self.tasks = kind, list(ev.tasks)
        elif isinstance(ev, wire.TaskResult) and self.is_task_run and ev.iter == 0:
            self.task_status[ev.task] = ev.status
            self.spent += ev.cost_usd  # a task run writes no budget line; its summary has the total

    def passed(self, ts: float) -> None:
        """An event at `ts` went by: the clock moves, whether or not the event changed the view."""
        self.last_ts = ts
        if self._eta_from is None and self.phase == "iteration":
            self._eta_from = (self.iteration, self.elapsed(ts))

    def _start(self, ev: wire.Start, ts: float) -> None:
        if self._base_ts is not None:
            # a resume within the same log: the time the run was down is not the run's
            self._rebase(self.elapsed(self.last_ts if self.last_ts is not None else ts), ts)
        else:
            self._rebase(0.0, ts)
            # a resumed run's clock is unknown until its first budget event carries it over
            self.clock_known = not ev.resumed
        self.started = True
        self.gate = ev.gate
        self.direction = ev.direction
        self.resumed = bool(ev.resumed)
        self._eta_from = None
        if ev.budget is not None:
            self._caps(ev.budget)
        else:  # a crucible-written start: 0 means no cap
            self.total = ev.iters_total or None
            self.max_cost = ev.max_cost or None
            self.max_time = float(ev.max_secs) if ev.max_secs else None

    def _caps(self, caps: dict[str, Any]) -> None:
        if "iterations" in caps:
            self.total = caps["iterations"]
        if "max_cost" in caps:
            self.max_cost = caps["max_cost"]
        if "max_time" in caps:
            self.max_time = caps["max_time"]

    def _phase(self, ev: wire.Phase, ts: float) -> None:
        self.phase = ev.phase
        if ev.phase == "iteration":
            self.current, self.step = ev.iter, ""
        elif ev.phase in ("starting", "baseline", "finished"):
            self.current = None
        parked = ev.phase in PARKED_PHASES
        if parked != self._parked:
            self._rebase(self.elapsed(ts), ts)
            self._parked = parked

    def _row(self, row: wire.RowWire) -> None:
        if row.baseline is not None:
            self.baseline = row.baseline
        elif row.decision == "baseline":
            self.baseline = row.score
        if row.best is not None:
            self.best = row.best
        elif row.decision in ("baseline", "keep") and row.score is not None:
            self.best = row.score
        if not row.deep:
            return
        if row.iter > 0 and row.decision != "baseline":
            self.iteration = max(self.iteration, row.iter)
            if row.decision == "keep":
                self.kept += 1
            elif row.decision in ("discard", INVALID):
                self.discarded += 1
                self.invalid += row_label(row) == INVALID
        self.best_history.append(self.best)
        self.current = None

    def _summary(self, ev: wire.Summary) -> None:
        """The run's own totals; after a resume they cover rows this process never saw."""
        self.summary = ev
        if ev.rows:
            self.kept = self.discarded = self.invalid = 0
            self.best_history = []
            self.best = None
            for row in ev.rows:
                self._row(row)
        if ev.best_score is not None:
            self.best = ev.best_score
        if ev.spent is not None:
            self.spent = ev.spent
        if ev.kept is not None:
            self.kept = ev.kept
        if ev.discarded is not None:
            self.discarded = ev.discarded

    def _rebase(self, active: float, ts: float) -> None:
        self._active_base, self._base_ts = active, ts
        self.clock_known = True

    # -- reading --------------------------------------------------------------------------
    @property
    def is_task_run(self) -> bool:
        return self.kind is not RunKind.LOOP

    def statuses(self) -> list[str]:
        """Each admitted task's status in graph order: `pending` until it settles, `undispatched`
        for one the ended run never reached."""
        unsettled = UNDISPATCHED if self.shutdown is not None else "pending"
        return [self.task_status.get(task.name, unsettled) for task in self.tasks]

    def verdict(self) -> str | None:
        """A task run's `pass` or `fail`, once its shutdown is folded."""
        standings = (TaskStanding(t.required, t.stage, self.task_status.get(t.name)) for t in self.tasks)
        return task_verdict(standings, self.shutdown.outcome if self.shutdown is not None else None)

    def elapsed(self, at: float) -> float:
        """The run's active seconds at wall-clock time `at` (resumes carried, parks excluded)."""
        if self._base_ts is None:
            return 0.0
        if self._parked:
            return self._active_base
        return self._active_base + max(0.0, at - self._base_ts)

    def eta(self, at: float) -> float | None:
        """Seconds left, from the pace of this process's iterations and the caps in force."""
        left: list[float] = []
        elapsed = self.elapsed(at)
        if self.max_time is not None:
            left.append(max(0.0, self.max_time - elapsed))
        if self.total is not None and self._eta_from is not None and self._last_decided is not None:
            done_from, elapsed_from = self._eta_from
            done = self.iteration - done_from
            if done > 0:
                pace = (self._last_decided - elapsed_from) / done
                into_current = elapsed - self._last_decided
                left.append(max(0.0, (self.total - self.iteration) * pace - into_current))
        return min(left) if left else None

    @property
    def width(self) -> int:
        """Digits of the iteration column, sized from the run's total so columns hold from the
        first iteration to the last; it never shrinks, so a lowered budget moves nothing either."""
        wanted = max(len(str(self.total or 0)), len(str(self.iteration)), 2 if self.total is None else 1)
        self._widest = max(self._widest, wanted)
        return self._widest
