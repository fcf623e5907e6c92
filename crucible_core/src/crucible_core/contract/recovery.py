"""How a resumed run classifies its predecessor's end, from the folded session log (pure)."""

from __future__ import annotations

import attrs

from crucible_core.contract import wire
from crucible_core.contract.fold import PARKED_PHASES, Folded
from crucible_core.contract.records import value_methods
from crucible_core.contract.wire import RecoveryClass


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Recovery:
    """The `recovery` event's payload: the class, the iteration it touched, and the evidence."""

    cls: RecoveryClass
    iter: int
    detail: str

    def to_event(self) -> wire.Recovery:
        return wire.Recovery(cls=self.cls, iter=self.iter, detail=self.detail)


# Outcomes after which a resume has nothing left to do unless the budget was raised.
FINAL_OUTCOMES = frozenset({"solved", "finished", "budget"})


def classify(f: Folded) -> Recovery:
    """Read the log tail; the first matching rule wins, from the most to the least specific."""
    if f.trailing_shutdown is not None:
        sd = f.trailing_shutdown
        return Recovery(
            RecoveryClass.CLEAN_EXIT,
            0,
            # the contract's iteration for a clean exit is 0; where it ended is in the detail
            f"previous run exited {sd.outcome}: {sd.reason}",
        )
    if f.fingerprint is None:
        return Recovery(RecoveryClass.DIED_IN_BASELINE, 0, "died during setup, before the baseline snapshot")
    if not f.segment_baselined:
        where = "the baseline" if f.segment_index <= 0 else f"the re-baseline of segment {f.segment_index}"
        return Recovery(RecoveryClass.DIED_IN_BASELINE, f.iteration, f"died during {where}")
    if f.last_phase == wire.WIDE_PHASE and not wire.wide_round_decided(f.rows):
        return Recovery(
            RecoveryClass.DIED_IN_WIDE_ROUND,
            f.last_phase_iter,
            "died during the wide round; finished proposals are kept, the rest are proposed again",
        )
    if not f.row_after_step and f.last_step_iter > f.iteration:
        it = f.last_step_iter
        if f.last_step == "decide":
            return Recovery(
                RecoveryClass.DIED_DECIDING, it, f"iteration {it} was measured but its row was never written"
            )
        doing = {"propose": "the agent turn", "apply": "apply", "measure": "the measure"}.get(
            f.last_step or "", str(f.last_step)
        )
        return Recovery(RecoveryClass.DIED_MID_TURN, it, f"iteration {it} died during {doing}")
    if f.open_turn_iter is not None and f.open_turn_iter > f.iteration:
        it = f.open_turn_iter  # a log without steps (crucible's own): the agent bracket is open
        return Recovery(RecoveryClass.DIED_MID_TURN, it, f"iteration {it} died during the agent turn")
    if f.open_plan is not None:
        plan = f.open_plan
        done = sum(1 for t in plan.tasks if t.name in f.plan_results)
        return Recovery(
            RecoveryClass.DIED_IN_PLAN_TASK,
            f.last_phase_iter,
            f"plan v{plan.plan_version} was never accounted ({done}/{len(plan.tasks)} tasks resulted)",
        )
    if f.last_phase in PARKED_PHASES or (f.open_wait is not None and f.open_wait.get("mode") == "block"):
        # a distress suspend is a block-mode approval wait, so it shares this class
        wait = f.open_wait
        if wait is not None and wait.get("handle") == "distress":
            what = "a distress suspend (the agent paged for help)"
        elif wait is not None:
            what = f"approval {wait.get('handle')!r} ({wait.get('mode')})"
        else:
            what = "an operator pause"
        return Recovery(RecoveryClass.DIED_AWAITING_APPROVAL, f.iteration, f"died parked on {what}")
    if f.last_phase == "iteration" and f.last_phase_iter > f.iteration:
        it = f.last_phase_iter
        return Recovery(RecoveryClass.DIED_MID_TURN, it, f"iteration {it} began but its turn never started")
    return Recovery(
        RecoveryClass.DIED_BETWEEN_ITERATIONS,
        f.iteration,
        f"died after iteration {f.iteration} was recorded",
    )


def unlogged_keep(f: Folded, recorded: str | None) -> str | None:
    """The kept state a world's own record names beyond everything the log knows, or None.

    A world records a kept state the moment it keeps it; the log's row follows. A recorded
    state that no row of the log names means the log lost its tail (cut short, damaged) or
    its writer died between the two. Either way the state was kept, and a resume must not
    roll back past it. A log that names no kept state (crucible's own, before its first
    keep) gives nothing to compare.
    """
    if not recorded or not f.best_token or recorded == f.best_token:
        return None
    if recorded in f.kept_shas or any(row.kept_snap == recorded for row in f.rows):
        return None  # a state the log already names: nothing was kept beyond it
    return recorded
