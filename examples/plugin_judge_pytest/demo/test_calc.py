"""The demo's gate: three tests, one passing at the start."""

from calc import add, mul, neg


def test_add() -> None:
    assert add(2, 3) == 5


def test_mul() -> None:
    assert mul(2, 3) == 6


def test_neg() -> None:
    assert neg(2) == -2
