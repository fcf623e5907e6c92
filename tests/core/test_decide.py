"""The decide rule (C-DECIDE), exhaustively: direction, ties, tiebreaks, solved, invalid readings."""

from __future__ import annotations

import itertools

import pytest

from crucible_core.contract.decide import Best, Verdict, advance, decide
from crucible_core.contract.reading import Direction, Reading

HIGHER, LOWER = Direction.HIGHER, Direction.LOWER


def r(
    score: float | None, *, valid: bool = True, tiebreak: float | None = None, solved: bool = False
) -> Reading:
    return Reading(valid=valid, score=score, tiebreak=tiebreak, solved=solved)


def test_first_valid_reading_is_the_baseline() -> None:
    assert decide(r(5), Best(), HIGHER) is Verdict.BASELINE
    assert decide(r(None), Best(), HIGHER) is Verdict.DISCARD


@pytest.mark.parametrize(("direction", "better", "worse"), [(HIGHER, 6, 4), (LOWER, 4, 6)])
def test_strictly_better_keeps(direction: Direction, better: float, worse: float) -> None:
    best = Best(5)
    assert decide(r(better), best, direction) is Verdict.KEEP
    assert decide(r(worse), best, direction) is Verdict.DISCARD
    assert decide(r(5), best, direction) is Verdict.DISCARD


def test_tie_with_better_tiebreak_keeps() -> None:
    assert decide(r(5, tiebreak=1), Best(5, tiebreak=2), HIGHER, LOWER) is Verdict.KEEP
    assert decide(r(5, tiebreak=3), Best(5, tiebreak=2), HIGHER, LOWER) is Verdict.DISCARD
    # a best with no recorded tiebreak counts as the worst value
    assert decide(r(5, tiebreak=3), Best(5), HIGHER) is Verdict.KEEP
    # a reading without a tiebreak never wins a tie
    assert decide(r(5), Best(5, tiebreak=2), HIGHER) is Verdict.DISCARD


def test_tiebreak_direction_defaults_to_direction() -> None:
    assert decide(r(5, tiebreak=3), Best(5, tiebreak=2), HIGHER) is Verdict.KEEP
    assert decide(r(5, tiebreak=3), Best(5, tiebreak=2), LOWER) is Verdict.DISCARD


def test_solved_forces_a_keep_but_never_rescues_invalid() -> None:
    assert decide(r(3, solved=True), Best(5), HIGHER) is Verdict.KEEP
    assert decide(r(9, valid=False, solved=True), Best(5), HIGHER) is Verdict.DISCARD
    assert decide(r(None, solved=True), Best(5), HIGHER) is Verdict.DISCARD


def test_exhaustive_against_the_formula() -> None:
    scores = [None, 1.0, 2.0, 3.0]
    for score, best, valid, solved, tb, btb, direction in itertools.product(
        scores, [1.0, 2.0, 3.0], [True, False], [True, False], [None, 1.0, 2.0], [None, 1.0], [HIGHER, LOWER]
    ):
        reading = r(score, valid=valid, tiebreak=tb, solved=solved)
        incumbent = Best(best, btb)

        def better(a: float, b: float, direction: Direction = direction) -> bool:
            return a > b if direction is HIGHER else a < b

        tiebreak_better = tb is not None and (btb is None or better(tb, btb))
        expected = (
            valid
            and score is not None
            and (better(score, best) or (score == best and tiebreak_better) or solved)
        )
        assert (decide(reading, incumbent, direction) is Verdict.KEEP) == expected


def test_advance_moves_the_best_only_on_keep() -> None:
    best = Best(5, 1)
    assert advance(best, r(7, tiebreak=2), Verdict.KEEP) == Best(7, 2)
    assert advance(best, r(7), Verdict.DISCARD) == best
