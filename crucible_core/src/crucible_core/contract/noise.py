"""Keeps that survive a noisy measure: combining repeated readings and the margin a keep must clear.

Pure. A judge measures a candidate once; with `[judge].repeats = N` the engine measures it N
times and folds the N readings into one with `combine`. The keep rule then asks the combined
score to beat the best by more than a margin (`decide(..., margin=...)`): a fixed one from
`[judge].min_improvement`, one derived from the baseline's own spread (`[judge].noise = "auto"`),
whichever is larger. `note_with_margin` says, on a row a margin held back, what it needed.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import attrs

from crucible_core.contract.reading import Direction, Reading
from crucible_core.contract.records import value_methods


class Statistic(enum.StrEnum):
    MEDIAN = "median"  # the default: one wild sample cannot move it
    MEAN = "mean"


def summarize(values: Sequence[float], statistic: Statistic) -> float:
    import statistics  # deferred: ~20 ms (it imports fractions, decimal, random) that loading a manifest never needs

    if not values:
        raise ValueError("no values to summarize")
    if statistic is Statistic.MEAN:
        return statistics.fmean(values)
    return float(statistics.median(values))


def combine(readings: Sequence[Reading], statistic: Statistic = Statistic.MEDIAN) -> Reading:
    """One reading standing for N measurements of the same candidate.

    Any unscoreable sample makes the whole candidate unscoreable (a candidate that sometimes
    fails is not a candidate to keep); otherwise score and tiebreak are the statistic of the
    samples, solved needs every sample solved, and the samples travel along for the row.
    """
    if not readings:
        raise ValueError("combine needs at least one reading")
    for reading in readings:
        if not reading.scoreable:
            return attrs.evolve(reading, samples=_scores(readings))
    scores = [r.score for r in readings if r.score is not None]
    tiebreaks = [r.tiebreak for r in readings if r.tiebreak is not None]
    first = readings[0]
    return attrs.evolve(
        first,
        score=summarize(scores, statistic),
        tiebreak=summarize(tiebreaks, statistic) if len(tiebreaks) == len(readings) else None,
        solved=all(r.solved for r in readings),
        samples=tuple(scores) if len(readings) > 1 else (),
    )


def _scores(readings: Sequence[Reading]) -> tuple[float, ...]:
    return tuple(r.score for r in readings if r.score is not None) if len(readings) > 1 else ()


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Margin:
    """`[judge].min_improvement`: an absolute amount, or a fraction of the incumbent's size."""

    absolute: float = 0.0
    relative: float = 0.0  # 0.02 for "2%"

    def against(self, best: float | None) -> float:
        """The amount a candidate must beat `best` by (a relative margin scales with |best|)."""
        if best is None:
            return self.absolute
        return max(self.absolute, self.relative * abs(best))


class MarginError(ValueError):
    pass


def parse_margin(value: float | int | str | None) -> Margin:
    """`0.5` -> absolute 0.5; `"2%"` -> relative 0.02; `"0.5"` -> absolute 0.5. Never negative."""
    if value is None:
        return Margin()
    if isinstance(value, bool):
        raise MarginError(f'min_improvement must be a number or a percentage like "2%" (got {value!r})')
    if isinstance(value, int | float):
        number, relative = float(value), False
    else:
        text = value.strip()
        relative = text.endswith("%")
        try:
            number = float(text[:-1] if relative else text)
        except ValueError:
            raise MarginError(
                f'min_improvement must be a number or a percentage like "2%" (got {value!r})'
            ) from None
    if not number >= 0 or number == float("inf"):
        raise MarginError(f"min_improvement must be a finite amount of at least 0 (got {value!r})")
    return Margin(relative=number / 100.0) if relative else Margin(absolute=number)


# 1.4826 x the median absolute deviation estimates the standard deviation of normal noise;
# NOISE_SIGMAS of those is the margin `noise = "auto"` asks a keep to clear.
MAD_TO_SIGMA = 1.4826
NOISE_SIGMAS = 3.0


def noise_margin(samples: Sequence[float]) -> float:
    """The margin `noise = "auto"` derives from the baseline's repeated scores: three robust
    standard deviations (1.4826 x the median absolute deviation from the median).

    The median absolute deviation ignores any one sample, however wild: among 5 samples a single
    slow outlier moves it by at most one place, where it would have set the whole range. With
    normal noise and 5 samples a no-change candidate clears it about 4% of the time, and a real
    change of 2 standard deviations about 42% (tests/core/test_noise.py measures both); more
    samples do better.
    """
    import statistics

    if len(samples) < 2:
        return 0.0
    middle = statistics.median(samples)
    spread = statistics.median(abs(value - middle) for value in samples)
    return float(NOISE_SIGMAS * MAD_TO_SIGMA * spread)


def note_with_margin(
    note: str, *, score: float | None, best: float | None, margin: float | None, direction: str
) -> str:
    """A discarded row's note as the views show it: first what the margin asked of the candidate,
    then the measure's own words ("needed below 9.7 (best 10, margin 0.3); cost 9.8").

    The row carries the best it was compared with and the margin it had to clear; with no margin
    (or no score) the note is left as it is. The engine writes this note into the log itself;
    the views apply it too, for logs written before it did, and never twice.
    """
    if score is None or best is None or not margin or margin <= 0:
        return note
    needed = f"below {best - margin:.6g}" if direction == Direction.LOWER else f"above {best + margin:.6g}"
    held = f"needed {needed} (best {best:.6g}, margin {margin:.6g})"
    if held in note:
        return note  # the engine wrote it into the log's note already (logs before it did not)
    return f"{held}; {note}" if note else held
