"""Ranking a wide round's candidates: plain top-k, and successive halving. Pure.

A wide round proposes N candidates at once; each is then measured (serially, by the caller's
`measure`) and the best `k` seed the deep loop. `top_k` measures every candidate once.
`successive_halving` measures every candidate once, re-measures the better half, then the
better half of those, and so on until `k` remain, ranking each round on the statistic of
every sample a candidate has so far: measurements go where the ranking is still uncertain.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import attrs

from crucible_core.api import Direction, Statistic, summarize


@attrs.frozen
class Ranked:
    winners: tuple[str, ...]  # best first, at most k
    samples: dict[str, tuple[float, ...]]  # every score each candidate got (none: unscoreable)
    measurements: int  # how many measures the policy spent


def halving_rounds(n: int, k: int) -> list[int]:
    """How many candidates each round measures: n, then ceil(half) until k or fewer remain."""
    if n <= 0:
        return []
    k = max(1, k)
    rounds = [n]
    while rounds[-1] > k:
        rounds.append(max(k, math.ceil(rounds[-1] / 2)))
    return rounds


def _order(
    names: Sequence[str], samples: dict[str, list[float]], direction: Direction, statistic: Statistic
) -> list[str]:
    """Scoreable candidates best first (ties keep proposal order); unscoreable ones are dropped."""
    scored = [name for name in names if samples[name]]
    sign = 1.0 if direction is Direction.LOWER else -1.0
    return sorted(scored, key=lambda name: sign * summarize(samples[name], statistic))


def top_k(
    names: Sequence[str],
    measure: Callable[[str], float | None],
    k: int,
    direction: Direction,
    statistic: Statistic = Statistic.MEDIAN,
) -> Ranked:
    """Measure each candidate once; the best k win. `measure` returns None for no valid score."""
    samples: dict[str, list[float]] = {name: [] for name in names}
    for name in names:
        score = measure(name)
        if score is not None:
            samples[name].append(score)
    order = _order(names, samples, direction, statistic)
    return Ranked(tuple(order[: max(1, k)]), {n: tuple(s) for n, s in samples.items()}, len(names))


def successive_halving(
    names: Sequence[str],
    measure: Callable[[str], float | None],
    k: int,
    direction: Direction,
    statistic: Statistic = Statistic.MEDIAN,
) -> Ranked:
    """Measure all, keep the better half, measure those again, ... until k remain.

    A candidate that gives no valid score in any round is out (an unreliable candidate is not
    one to seed the deep loop with).
    """
    samples: dict[str, list[float]] = {name: [] for name in names}
    alive = list(names)
    spent = 0
    for width in halving_rounds(len(names), k):
        alive = alive[:width]
        survivors = []
        for name in alive:
            score = measure(name)
            spent += 1
            if score is not None:
                samples[name].append(score)
                survivors.append(name)
            else:
                samples[name] = []
        alive = _order(survivors, samples, direction, statistic)
    return Ranked(tuple(alive[: max(1, k)]), {n: tuple(s) for n, s in samples.items()}, spent)
