"""Arithmetic with two planted bugs for the demo agent to fix."""


def add(a: int, b: int) -> int:
    return a - b  # bug: subtracts


def mul(a: int, b: int) -> int:
    return a + b  # bug: adds


def neg(a: int) -> int:
    return -a
