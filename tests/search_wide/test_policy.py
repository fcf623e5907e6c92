"""Wide-round ranking policies: top-k and successive halving, with a seeded noisy measure."""

from __future__ import annotations

import random

import pytest

from crucible_core.contract.reading import Direction
from crucible_search_wide.policy import halving_rounds, successive_halving, top_k

HIGHER, LOWER = Direction.HIGHER, Direction.LOWER


@pytest.mark.parametrize(
    ("n", "k", "rounds"),
    [
        (4, 1, [4, 2, 1]),
        (8, 2, [8, 4, 2]),
        (5, 1, [5, 3, 2, 1]),
        (3, 3, [3]),
        (2, 5, [2]),
        (0, 1, []),
        (4, 0, [4, 2, 1]),
    ],
)
def test_halving_rounds(n: int, k: int, rounds: list[int]) -> None:
    assert halving_rounds(n, k) == rounds


def test_top_k_measures_once_and_ranks() -> None:
    scores = {"a": 3.0, "b": 9.0, "c": None, "d": 5.0}
    ranked = top_k(list(scores), lambda name: scores[name], 2, HIGHER)
    assert ranked.winners == ("b", "d") and ranked.measurements == 4
    assert ranked.samples["c"] == ()
    assert top_k(list(scores), lambda name: scores[name], 1, LOWER).winners == ("a",)


def test_top_k_ties_keep_proposal_order() -> None:
    assert top_k(["x", "y"], lambda _: 1.0, 1, HIGHER).winners == ("x",)


def test_halving_spends_measurements_on_the_leaders() -> None:
    calls: list[str] = []
    truth = {"a": 1.0, "b": 4.0, "c": 3.0, "d": 2.0}

    def measure(name: str) -> float:
        calls.append(name)
        return truth[name]

    ranked = successive_halving(list(truth), measure, 1, HIGHER)
    assert ranked.winners == ("b",)
    assert calls == ["a", "b", "c", "d", "b", "c", "b"]  # all once, the top half again, the top once more
    assert ranked.measurements == 7 and ranked.samples["b"] == (4.0, 4.0, 4.0)


def test_halving_drops_a_candidate_that_stops_scoring() -> None:
    seen: dict[str, int] = {}

    def measure(name: str) -> float | None:
        seen[name] = seen.get(name, 0) + 1
        if name == "b" and seen[name] == 2:
            return None  # flaky
        return {"a": 1.0, "b": 4.0, "c": 3.0, "d": 2.0}[name]

    assert successive_halving(["a", "b", "c", "d"], measure, 1, HIGHER).winners == ("c",)


def test_halving_picks_the_true_best_more_often_than_top_k_under_noise() -> None:
    """Eight candidates whose true scores are 0.3 apart, measured with noise sigma 1."""
    truth = {f"c{i}": i * 0.3 for i in range(8)}
    wins = {"top_k": 0, "halving": 0}
    for seed in range(200):
        rng = random.Random(seed)

        def measure(name: str, rng: random.Random = rng) -> float:
            return truth[name] + rng.gauss(0.0, 1.0)

        wins["top_k"] += top_k(list(truth), measure, 1, HIGHER).winners == ("c7",)
        wins["halving"] += successive_halving(list(truth), measure, 1, HIGHER).winners == ("c7",)
    assert wins["halving"] > wins["top_k"]
