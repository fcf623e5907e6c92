"""Noise handling in the contract: combining repeated readings, margins, and decide with a margin."""

from __future__ import annotations

import itertools
import random
import statistics

import pytest

from crucible_core.contract.decide import Best, Verdict, decide
from crucible_core.contract.noise import (
    Margin,
    MarginError,
    Statistic,
    combine,
    noise_margin,
    note_with_margin,
    parse_margin,
)
from crucible_core.contract.reading import Direction, Reading

HIGHER, LOWER = Direction.HIGHER, Direction.LOWER


def r(
    score: float | None, *, valid: bool = True, tiebreak: float | None = None, solved: bool = False
) -> Reading:
    return Reading(valid=valid, score=score, tiebreak=tiebreak, solved=solved, note=f"s={score}")


def test_combine_takes_the_median_and_keeps_every_sample() -> None:
    combined = combine([r(10), r(100), r(11)])
    assert combined.score == 11  # one wild sample does not move the median
    assert combined.samples == (10, 100, 11)
    assert combined.valid and combined.note == "s=10"


def test_combine_mean_and_tiebreak() -> None:
    combined = combine([r(1, tiebreak=4), r(2, tiebreak=6)], Statistic.MEAN)
    assert combined.score == 1.5 and combined.tiebreak == 5
    # a tiebreak missing from one sample is no tiebreak at all
    assert combine([r(1, tiebreak=4), r(2)]).tiebreak is None


def test_combine_one_reading_is_that_reading() -> None:
    assert combine([r(3, solved=True)]) == r(3, solved=True)


def test_an_unscoreable_sample_makes_the_candidate_unscoreable() -> None:
    combined = combine([r(1), r(None, valid=False), r(2)])
    assert not combined.scoreable and combined.samples == (1, 2)
    combined = combine([r(1), r(5, valid=False)])
    assert not combined.valid


def test_solved_needs_every_sample() -> None:
    assert combine([r(1, solved=True), r(1, solved=True)]).solved
    assert not combine([r(1, solved=True), r(1)]).solved


def test_combine_refuses_nothing() -> None:
    with pytest.raises(ValueError):
        combine([])


@pytest.mark.parametrize(
    ("raw", "margin"),
    [
        (None, Margin()),
        (0, Margin()),
        (0.5, Margin(absolute=0.5)),
        (3, Margin(absolute=3.0)),
        ("0.25", Margin(absolute=0.25)),
        ("2%", Margin(relative=0.02)),
        (" 10% ", Margin(relative=0.1)),
    ],
)
def test_parse_margin(raw: object, margin: Margin) -> None:
    assert parse_margin(raw) == margin  # type: ignore[arg-type]


@pytest.mark.parametrize("raw", [True, -1, "-2%", "two", "%", "nan", "inf", float("inf")])
def test_parse_margin_refuses(raw: object) -> None:
    with pytest.raises(MarginError):
        parse_margin(raw)  # type: ignore[arg-type]


def test_margin_against_the_best() -> None:
    assert Margin(relative=0.02).against(200) == 4
    assert Margin(relative=0.02).against(-200) == 4  # the size of the best, not its sign
    assert Margin(absolute=1, relative=0.02).against(10) == 1
    assert Margin(relative=0.5).against(None) == 0


def test_noise_margin_is_three_robust_standard_deviations() -> None:
    # median 10.5, absolute deviations 0.5 1.5 0.5 1 -> their median 0.75; 3 x 1.4826 x 0.75
    assert noise_margin([10, 12, 11, 9.5]) == pytest.approx(3.33585)
    assert noise_margin([5, 5, 5]) == 0  # a steady measure asks for no margin
    assert noise_margin([7]) == 0 and noise_margin([]) == 0


def test_one_outlier_cannot_blow_up_the_margin() -> None:
    """Issue 28: one slow sample among five set a margin larger than the baseline itself."""
    samples = [0.50, 0.52, 0.49, 0.51, 1.9]
    baseline = statistics.median(samples)
    margin = noise_margin(samples)
    assert margin < 0.1 * baseline  # the range would have been 1.41, nearly three baselines
    assert margin == noise_margin([0.50, 0.52, 0.49, 0.51, 190.0])  # however wild the outlier
    # a candidate 20% faster is kept, as it would be against the steady samples alone
    assert decide(r(0.41), Best(baseline), LOWER, margin=margin) is Verdict.KEEP


@pytest.mark.parametrize(
    ("repeats", "chance_keeps", "real_keeps", "outlier_margin"),
    [
        (3, (0.10, 0.15), (0.50, 0.60), 4.6),
        (5, (0.03, 0.055), (0.38, 0.48), 3.5),
        (7, (0.007, 0.02), (0.31, 0.40), 3.3),
        (10, (0.0, 0.006), (0.23, 0.31), 3.3),
    ],
)
def test_the_auto_margin_measured_on_seeded_normal_noise(
    repeats: int, chance_keeps: tuple[float, float], real_keeps: tuple[float, float], outlier_margin: float
) -> None:
    """The table in docs/search.md: unit normal noise, the baseline and each candidate measured
    `repeats` times and their medians compared. How often a no-change candidate clears the
    margin, how often one 2 standard deviations better does, and the margin a 20-sigma sample
    among the baseline's leaves (the range would make it about 21)."""
    rng = random.Random(28)

    def median_of(shift: float = 0.0) -> float:
        return statistics.median(rng.gauss(shift, 1.0) for _ in range(repeats))

    trials = 4000
    chance = real = 0
    with_outlier = []
    for _ in range(trials):
        base = [rng.gauss(0.0, 1.0) for _ in range(repeats)]
        margin, best = noise_margin(base), statistics.median(base)
        chance += decide(r(median_of()), Best(best), LOWER, margin=margin) is Verdict.KEEP
        real += decide(r(median_of(-2.0)), Best(best), LOWER, margin=margin) is Verdict.KEEP
        with_outlier.append(noise_margin([*base[:-1], 20.0]))
    assert chance_keeps[0] <= chance / trials <= chance_keeps[1]
    assert real_keeps[0] <= real / trials <= real_keeps[1]
    assert statistics.median(with_outlier) < outlier_margin


@pytest.mark.parametrize(
    ("direction", "expected"),
    [
        ("lower", "needed below 9.7 (best 10, margin 0.3); cost 9.8"),
        ("higher", "needed above 10.3 (best 10, margin 0.3); cost 9.8"),
    ],
)
def test_a_held_back_note_names_the_score_it_needed(direction: str, expected: str) -> None:
    assert note_with_margin("cost 9.8", score=9.8, best=10, margin=0.3, direction=direction) == expected
    assert note_with_margin("", score=9.8, best=10, margin=0.3, direction=direction) == expected.split(";")[0]


def test_a_note_without_a_margin_is_left_alone() -> None:
    for margin in (None, 0.0):
        assert note_with_margin("cost 9", score=9, best=10, margin=margin, direction="lower") == "cost 9"
    assert note_with_margin("bad", score=None, best=10, margin=1, direction="lower") == "bad"


def test_decide_with_a_margin_exhaustively() -> None:
    """Every direction, margin and distance: keep exactly when the candidate clears the margin."""
    for direction, margin, delta in itertools.product(
        (HIGHER, LOWER), (0, 0.5, 2), (-3, -2, -0.5, 0, 0.5, 2, 2.5, 3)
    ):
        improvement = delta  # how far the candidate is better than the best (negative: worse)
        score = 10 + improvement if direction is HIGHER else 10 - improvement
        verdict = decide(r(score), Best(10), direction, margin=margin)
        expected = Verdict.KEEP if improvement > margin else Verdict.DISCARD
        assert verdict is expected, (direction, margin, delta)


def test_margin_leaves_ties_solved_baselines_and_invalid_alone() -> None:
    # an exact tie is still settled by the tiebreak; solved still keeps; the first reading is the baseline
    assert decide(r(10, tiebreak=1), Best(10, tiebreak=2), HIGHER, LOWER, margin=5) is Verdict.KEEP
    assert decide(r(10.1), Best(10), HIGHER, margin=5) is Verdict.DISCARD
    assert decide(r(9, solved=True), Best(10), HIGHER, margin=5) is Verdict.KEEP
    assert decide(r(1), Best(), HIGHER, margin=5) is Verdict.BASELINE
    assert decide(r(None, valid=False), Best(10), HIGHER, margin=0) is Verdict.DISCARD
    # a negative margin cannot make a worse candidate win
    assert decide(r(9), Best(10), HIGHER, margin=-5) is Verdict.DISCARD
