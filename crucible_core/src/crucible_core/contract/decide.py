"""The universal keep/discard rule (RFC-0001:C-DECIDE) as pure functions."""

from __future__ import annotations

import enum

import attrs

from crucible_core.contract.reading import Direction, Reading
from crucible_core.contract.records import value_methods


class Verdict(enum.StrEnum):
    KEEP = "keep"
    DISCARD = "discard"
    BASELINE = "baseline"  # the first valid reading: always kept, sets the best


# A discarded candidate that got no valid reading, as every view names it. The wire records it
# as a `discard` whose `valid` is false (crucible's own engine writes `invalid` outright, and so
# does ours for an unscoreable baseline); views say `invalid` for both and count it among the
# discarded ("2 discarded (1 invalid)").
INVALID = "invalid"


def shown_decision(decision: str, valid: bool | None) -> str:
    """A row's decision as the console, `results`, `show`, RESULTS.md and the flow page name it."""
    if decision == Verdict.DISCARD and valid is False:
        return INVALID
    return decision


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Best:
    """What a candidate is compared against: the best kept score and its tiebreak."""

    score: float | None = None
    tiebreak: float | None = None


def better(candidate: float, incumbent: float, direction: Direction, margin: float = 0.0) -> bool:
    """Strictly better, and by more than `margin` (0: any amount)."""
    if direction is Direction.LOWER:
        return candidate < incumbent - margin
    return candidate > incumbent + margin


def tiebreak_better(reading: Reading, best: Best, direction: Direction) -> bool:
    """A reading without a tiebreak never wins a tie; a best without one counts as the worst."""
    if reading.tiebreak is None:
        return False
    if best.tiebreak is None:
        return True
    return better(reading.tiebreak, best.tiebreak, direction)


def decide(
    reading: Reading,
    best: Best,
    direction: Direction,
    tiebreak_direction: Direction | None = None,
    margin: float = 0.0,
) -> Verdict:
    """keep = valid and scored and (strictly better, or equal with a better tiebreak, or solved).

    With a `margin` (noise handling, contract/noise.py) "better" means better by more than the
    margin; a score inside it is noise, so an exact tie is still decided by the tiebreak.
    """
    if not reading.scoreable:
        return Verdict.DISCARD
    assert reading.score is not None
    if best.score is None:
        return Verdict.BASELINE
    if better(reading.score, best.score, direction, max(0.0, margin)):
        return Verdict.KEEP
    if reading.score == best.score and tiebreak_better(reading, best, tiebreak_direction or direction):
        return Verdict.KEEP
    if reading.solved:
        return Verdict.KEEP
    return Verdict.DISCARD


def advance(best: Best, reading: Reading, verdict: Verdict) -> Best:
    """The best after a decision: a kept reading becomes the new incumbent."""
    if verdict is Verdict.DISCARD:
        return best
    return Best(score=reading.score, tiebreak=reading.tiebreak)
