"""Folding a session log into the state a resumed run continues from: pure functions, one pass.

Every line is decoded through the wire (`wire.py`), so a log written by crucible itself folds
the same way as ours: rows nested under `row` with their `decision`, budget `spent`, the
segment and identity records. The fold is on the hot path of `--resume` for long runs, so it
is one loop with a type dispatch ordered by frequency; it keeps references to the decoded rows.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, cast

import attrs

from crucible_core.contract import wire
from crucible_core.contract.json_bounds import loads_valid_text
from crucible_core.contract.records import value_methods

# Phases in which the loop idles and the budget clock stops.
PARKED_PHASES = frozenset({"parked", "paused", "distressed"})


# Decisions that open a segment: its first measurement (ours writes "invalid" for an unscoreable one).
BASELINE_DECISIONS = frozenset({"baseline", "baseline-skipped", "invalid"})
DISCARD_DECISIONS = frozenset({"discard", "discarded"})


@value_methods
@attrs.define(repr=False, eq=False)
class Folded:
    """What the session log says about a run, as of its last decodable line."""

    events: int = 0
    start: wire.Start | None = None  # the first start event: the run's original budget
    identity: wire.Identity | None = None  # the first identity event: what scores compare against
    # an identity a resume wrote: only a resume of a log with a segment line writes one
    resumed_identity: bool = False
    trailing_shutdown: wire.Shutdown | None = None  # only when it is the last event
    last_kind: str | None = None
    # the open segment (a rescope replaces all of these together)
    segment_index: int = -1
    regime: str = ""
    fingerprint: str | None = None
    best_token: str | None = None
    baseline_score: float | None = None
    baseline_total: float | None = None
    noise_margin: float = 0.0  # the segment's baseline-derived keep margin (`[judge].noise = "auto"`)
    best_score: float | None = None
    best_tiebreak: float | None = None
    segment_baselined: bool = False
    # progress
    iteration: int = 0
    kept: int = 0
    discarded: int = 0
    solved: bool = False
    kept_shas: list[str] = attrs.field(factory=list)
    rows: list[wire.RowWire] = attrs.field(factory=list)
    spent: float = 0.0
    active_s: float = 0.0
    parked_s: float = 0.0
    summary_best: float | None = None  # the last summary's best, when the run got that far
    # where the predecessor was when its log ended
    last_phase: str | None = None
    last_phase_iter: int = 0
    last_step: str | None = None
    last_step_iter: int = 0
    row_after_step: bool = True
    open_turn_iter: int | None = None  # an agent_start with no agent_done after it
    open_plan: wire.PlanAdmitted | None = None  # a plan_admitted with no row after it
    open_wait: dict[str, Any] | None = None  # an approval_wait with no approval_resolved after it
    open_wait_parked_s: float = 0.0  # how long the run parked on that wait (what --max-park bounds)
    escalation: wire.Escalation | None = None
    # what the log carries beyond the loop's counters
    recoveries: list[wire.Recovery] = attrs.field(factory=list)
    plan: wire.PlanAdmitted | None = None
    plan_results: dict[str, wire.TaskResult] = attrs.field(factory=dict)
    artifacts: wire.Artifacts | None = None  # the latest collection of the declared artifacts
    unknown: int = 0  # lines of a kind this reader does not know

    @property
    def resumes(self) -> int:
        return len(self.recoveries)

    @property
    def has_rows(self) -> bool:
        return any(row.deep for row in self.rows)

    @property
    def outcome(self) -> str | None:
        return self.trailing_shutdown.outcome if self.trailing_shutdown is not None else None


@contextlib.contextmanager
def _cycles_not_collected() -> Iterator[None]:
    """The cyclic collector paused while a fold runs, as it was before afterwards.

    A fold keeps every decoded row, some five containers each, and makes no reference cycles
    (its records and their lists and dicts are trees): the collector's passes found nothing to
    free and, walking an ever larger heap, were a quarter of a 100,000-row fold (issue 27).
    What the fold drops is still freed at once by reference counting.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def fold_events(lines: Iterable[wire.Line]) -> Folded:
    """One pass over decoded wire lines; the caller decides how lines are read and skipped."""
    with _cycles_not_collected():
        return _fold_events(lines)


def _fold_events(lines: Iterable[wire.Line]) -> Folded:
    f = Folded()
    rows = f.rows
    kept_shas = f.kept_shas
    count = 0
    kind = None
    iteration = kept = discarded = 0
    solved = False
    best_token = None
    last_step = None
    last_step_iter = 0
    row_after_step = True
    # active time: the cumulative figure of the latest budget event plus the wall-clock since,
    # restarted at each process start (the gap between processes is not active time)
    mark_active = 0.0
    mark_ts: float | None = None
    last_ts: float | None = None
    spent_mark = 0.0
    spent_since = 0.0
    parked_s = 0.0
    park_since: float | None = None
    # the open wait's parked seconds: park stretches from a parked phase to the next phase, or
    # to the last line its process wrote (a killed process's park ends where its log does)
    wait_parked = 0.0
    wait_park_since: float | None = None
    open_wait: dict[str, Any] | None = None
    last_shutdown: wire.Shutdown | None = None
    # A line repeated (a copy appended, a log concatenated with itself) must not count twice:
    # a segment is baselined once, an iteration decided once, a commit kept once, and a turn
    # or a recovery line repeated verbatim carries the same stamp as its original.
    decided: set[int] = set()
    baselines: set[tuple[int, int, str]] = set()
    kept_seen: set[str] = set()
    stamped: set[tuple[str, float, int]] = set()
    # The rare kinds (contract/wire_rare.py) are told by their wire name: naming their classes
    # would define them all at the first line of any kind.
    for line in lines:
        count += 1
        ev = line.event
        ts = line.ts
        kind = ev.KIND
        if type(ev) is wire.Row:
            row = ev.row
            if row.deep:
                if row.decision in BASELINE_DECISIONS:
                    key = (f.segment_index, row.iter, row.decision)
                    if key in baselines:
                        continue  # a segment is baselined once: a repeated line
                    baselines.add(key)
                elif row.iter > 0 and (row.decision == "keep" or row.decision in DISCARD_DECISIONS):
                    if row.iter in decided:
                        continue  # the same iteration decided again: a repeated line
                    decided.add(row.iter)
            rows.append(row)
            f.open_plan = None
            if row.deep:
                it = row.iter
                decision = row.decision
                best = row.best if row.best is not None else row.score
                if decision == "keep":
                    if it > 0:
                        kept += 1
                    if row.kept_snap:
                        best_token = row.kept_snap
                    sha = row.sha or row.kept_snap
                    if sha and sha not in kept_seen:
                        kept_seen.add(sha)
                        kept_shas.append(sha)
                    if ev.solved:
                        solved = True
                    f.best_score = best
                    f.best_tiebreak = row.best_tiebreak if row.best is not None else row.tiebreak
                elif decision in BASELINE_DECISIONS:
                    f.segment_baselined = True
                    if row.kept_snap:
                        best_token = row.kept_snap
                    f.baseline_score = row.baseline if row.baseline is not None else row.score
                    f.baseline_total = row.baseline_total if row.baseline_total is not None else row.total
                    f.noise_margin = row.noise_margin or 0.0
                    f.best_score = best
                    f.best_tiebreak = row.best_tiebreak if row.best is not None else row.tiebreak
                    if ev.solved and decision == "baseline":
                        solved = True
                elif decision in DISCARD_DECISIONS and it > 0:
                    discarded += 1
                if it > iteration:
                    iteration = it
            elif row.phase == wire.WIDE_PHASE and row.decision == "keep" and row.kept_snap:
                # a wide round's winner, kept: it moves the best, but spends no iteration
                best_token = row.kept_snap
                if row.sha and row.sha not in kept_seen:
                    kept_seen.add(row.sha)
                    kept_shas.append(row.sha)
                if ev.solved:
                    solved = True
                f.best_score = row.best if row.best is not None else row.score
                f.best_tiebreak = row.best_tiebreak if row.best is not None else row.tiebreak
            row_after_step = True
        elif kind == "agent":
            pass  # the most frequent kind: nothing of the loop's state hangs on it
        elif type(ev) is wire.Budget:
            spent_mark = ev.spent
            spent_since = 0.0
            mark_active = ev.active_s if ev.active_s is not None else float(ev.elapsed_secs)
            parked_s = ev.parked_s or 0.0
            mark_ts = ts
            # a park's closing budget event already counts it: the next phase must not again
            park_since = None
        elif type(ev) is wire.Step:
            last_step = ev.step
            last_step_iter = ev.iter
            row_after_step = False
        elif type(ev) is wire.Phase:
            phase = ev.phase
            f.last_phase = phase
            f.last_phase_iter = ev.iter
            if wait_park_since is not None and ts is not None:
                wait_parked += ts - wait_park_since
                wait_park_since = None
            if phase in PARKED_PHASES:
                park_since = ts
                if open_wait is not None:
                    wait_park_since = ts
            elif park_since is not None and ts is not None:
                parked_s += ts - park_since
                park_since = None
        elif type(ev) is wire.Turn:
            if _repeated(stamped, kind, ts, ev.iter):
                continue
            spent_since += ev.cost
        elif type(ev) is wire.AgentStart:
            f.open_turn_iter = ev.iter
        elif kind == "artifacts":
            f.artifacts = cast("wire.Artifacts", ev)
        elif type(ev) is wire.AgentDone:
            f.open_turn_iter = None
        elif type(ev) is wire.Segment:
            f.segment_index = ev.index if ev.index is not None else f.segment_index + 1
            f.regime = ev.regime
            f.fingerprint = ev.fingerprint
            best_token = ev.snapshot
            f.baseline_score = f.baseline_total = f.best_score = f.best_tiebreak = None
            f.noise_margin = 0.0
            f.segment_baselined = False
        elif type(ev) is wire.Start:
            if f.start is None:
                f.start = ev
            if mark_ts is not None and last_ts is not None:
                mark_active += max(0.0, (park_since if park_since is not None else last_ts) - mark_ts)
            if park_since is not None and last_ts is not None:
                parked_s += last_ts - park_since  # a process killed while parked: parked to its last line
            mark_ts = ts
            park_since = None
            if wait_park_since is not None and last_ts is not None:
                wait_parked += last_ts - wait_park_since
                wait_park_since = None
        elif type(ev) is wire.Identity:
            if f.identity is None:
                f.identity = ev
            if ev.resumed:
                f.resumed_identity = True
        elif kind == "approval_wait":
            open_wait = wire.to_fields(ev)
            wait_parked = 0.0
            wait_park_since = None
        elif kind == "approval_resolved":
            open_wait = None
            wait_park_since = None
        elif kind == "escalation":
            f.escalation = cast("wire.Escalation", ev)
        elif type(ev) is wire.Shutdown:
            last_shutdown = ev
        elif type(ev) is wire.Summary:
            f.summary_best = ev.best_score
        elif kind == "recovery":
            recovery = cast("wire.Recovery", ev)
            if _repeated(stamped, kind, ts, recovery.iter):
                continue
            f.recoveries.append(recovery)
        elif kind == "plan_admitted":
            plan = cast("wire.PlanAdmitted", ev)
            if f.plan is None or f.plan.plan_version != plan.plan_version:
                f.plan_results.clear()
            f.plan = f.open_plan = plan
        elif kind == "task_result":
            result = cast("wire.TaskResult", ev)
            f.plan_results[result.task] = result
        elif type(ev) is wire.Unknown:
            f.unknown += 1
            kind = ev.kind
        if ts is not None:
            last_ts = ts
    f.events = count
    f.last_kind = kind
    f.trailing_shutdown = last_shutdown if kind == "shutdown" else None
    f.iteration = iteration
    f.kept = kept
    f.discarded = discarded
    f.solved = solved
    f.best_token = best_token
    f.last_step = last_step
    f.last_step_iter = last_step_iter
    f.row_after_step = row_after_step
    f.spent = spent_mark + spent_since
    if f.spent == 0.0 and f.plan_results:  # no budget line: the settled plan tasks' costs
        f.spent = sum(r.cost_usd for r in f.plan_results.values())
    end = park_since if park_since is not None else last_ts
    f.active_s = mark_active + (max(0.0, end - mark_ts) if mark_ts is not None and end is not None else 0.0)
    if park_since is not None and last_ts is not None:
        parked_s += last_ts - park_since
    f.parked_s = parked_s
    f.open_wait = open_wait
    if open_wait is not None:
        if wait_park_since is not None and last_ts is not None:
            wait_parked += last_ts - wait_park_since
        f.open_wait_parked_s = wait_parked
    return f


def _repeated(seen: set[tuple[str, float, int]], kind: str, ts: float | None, it: int) -> bool:
    """Whether a stamped line of this kind and iteration was folded already (a verbatim repeat)."""
    if ts is None:
        return False
    key = (kind, ts, it)
    if key in seen:
        return True
    seen.add(key)
    return False


def decode_lines(lines: Iterable[bytes]) -> Iterable[dict[str, Any]]:
    """JSON object lines of an NDJSON file that is not the session log (the admission ledger)."""
    loads = loads_valid_text
    for raw in lines:
        try:
            event = loads(raw)
        except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            continue
        if type(event) is dict and "kind" in event:
            yield event


def decode_wire_lines(lines: Iterable[bytes | str]) -> Iterator[wire.Line]:
    """Decodable wire lines of the session log; blank, torn and mistyped lines are skipped."""
    return wire.decode_lines(lines)


def fold_objects(objects: Iterable[Any]) -> Folded:
    """Fold already-parsed JSON line objects (each decoded through the wire; the rest skipped)."""
    return fold_events(line for line in map(wire.from_object, objects) if line is not None)


def fold_path(path: Path) -> Folded:
    """Fold the session log at `path` (an absent file folds to an empty run)."""
    try:
        with open(path, "rb") as handle:
            return fold_events(decode_wire_lines(handle))
    except FileNotFoundError:
        return Folded()
