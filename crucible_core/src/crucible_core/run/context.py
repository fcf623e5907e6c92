"""What an autoresearch run threads through its iterations: the Run, its Segment, the ways it ends.

Its own module so the loop, the gates and the engine all read it without importing each other.
"""

from __future__ import annotations

import enum
import hashlib
import time

import attrs

from crucible_core.contract import wire
from crucible_core.contract.decide import Best, Verdict, advance
from crucible_core.contract.reading import Reading
from crucible_core.contract.records import value_methods
from crucible_core.errors import ExitCode
from crucible_core.protocols import MeasureContext, TurnResult
from crucible_core.run.parking import Pending

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


@value_methods
@attrs.define(repr=False, eq=False)
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


@value_methods
@attrs.define(repr=False, eq=False)
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


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Measured:
    """An iteration whose candidate was applied and measured: only this can be decided."""

    iteration: int
    reading: Reading
    turn: TurnResult | None
    # The token the measured candidate was staged as, when the workspace is known to hold it
    # still (a valid reading: the measure's re-stage found no damage and put back any change).
    staged: str | None = None


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
