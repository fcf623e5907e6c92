"""Shared `__repr__`, `__eq__` and `__hash__` for attrs records, so attrs need not compile them per class.

attrs writes and compiles the source of every class's repr, equality and hash when the class
is defined. A `crucible run` defines some 250 attrs classes before its first iteration, and
those three methods were about a third of that cost (roughly 0.2 ms a class on the 2-core
machine, docs/performance.md, issue 27's sixth round). A record on the run's import path is
therefore declared

    @value_methods
    @attrs.frozen(repr=False, eq=False, slots=False)
    class Thing: ...

and gets the three methods below, which behave as attrs' own: the same repr text (fields with
`repr=False` left out, a field's own repr function used, `...` for a record inside itself),
equality only with an instance of the very same class over the fields that take part in it
(an `eq_key` applied), and a hash over the fields that take part in hashing (a mutable record,
`attrs.define`, is unhashable, as attrs makes it). attrs still builds `__init__` and the
frozen `__setattr__`; mypy's attrs plugin reads the inner decorator as before.

A frozen record is declared without slots (`slots=False`): a slotted class is one attrs
builds a second time, about 25 us a class at every start (some 200 records, issue 27's seventh
round), and slots guard nothing a frozen record's `__setattr__` does not already refuse (an
assignment to any name raises). A mutable record (`attrs.define`) keeps its slots, which
refuse a misspelt attribute.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

_T = TypeVar("_T", bound=type)

# Per class: (repr fields, eq fields, hash fields), each a tuple of (name, function or None).
_Plan = tuple[
    tuple[tuple[str, Callable[[Any], str] | None], ...],
    tuple[tuple[str, Callable[[Any], Any] | None], ...],
    tuple[tuple[str, Callable[[Any], Any] | None], ...],
]
_PLANS: dict[type, _Plan] = {}
# The records being repr'd on this thread, so a record that contains itself shows as `...`.
_REPRING = threading.local()


def value_methods(cls: _T) -> _T:
    """Give an attrs class built with `repr=False, eq=False` the repr, equality and hash attrs would have.

    A method the class body defines itself is kept. Exceptions are refused: attrs leaves their
    equality and hash to identity, and so must they stay.
    """
    if not attrs.has(cls) or issubclass(cls, BaseException):
        raise TypeError(f"{cls.__qualname__}: value_methods takes an attrs record, not an exception")
    own = cls.__dict__
    if "__repr__" not in own:
        cls.__repr__ = _repr  # type: ignore[method-assign]
    if "__eq__" not in own:
        cls.__eq__ = _eq  # type: ignore[method-assign]
        cls.__ne__ = _ne  # type: ignore[method-assign]
        if own.get("__hash__") is None:  # eq=False left object's identity hash in place
            # attrs hashes a frozen record by its fields and makes a mutable one unhashable.
            frozen = getattr(cls.__setattr__, "__name__", "") == "_frozen_setattrs"
            cls.__hash__ = _hash if frozen else None  # type: ignore[assignment]
    return cls


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        fields = attrs.fields(cls)
        shown = tuple((f.name, None if f.repr is True else f.repr) for f in fields if f.repr is not False)
        compared = tuple((f.name, f.eq_key) for f in fields if f.eq)
        hashed = tuple(
            (f.name, f.eq_key) for f in fields if f.hash is True or (f.hash is None and f.eq is True)
        )
        plan = _PLANS[cls] = (shown, compared, hashed)
    return plan


def _repr(self: Any) -> str:
    seen: set[int] | None = getattr(_REPRING, "seen", None)
    if seen is None:
        seen = _REPRING.seen = set()
    if id(self) in seen:
        return "..."
    seen.add(id(self))
    try:
        shown, _, _ = _plan(type(self))
        # A field that is not set yet (init=False, no default) shows as attrs shows it: NOTHING.
        parts = [f"{name}={(show or repr)(getattr(self, name, attrs.NOTHING))}" for name, show in shown]
        return f"{self.__class__.__qualname__.rsplit('>.', 1)[-1]}({', '.join(parts)})"
    finally:
        seen.discard(id(self))


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    _, compared, _ = _plan(type(self))
    for name, key in compared:
        mine, theirs = getattr(self, name), getattr(other, name)
        if key is not None:
            mine, theirs = key(mine), key(theirs)
        if not mine == theirs:  # noqa: SIM201 - `==` as attrs compares, not `!=`
            return False
    return True


def _ne(self: Any, other: Any) -> Any:
    result = _eq(self, other)
    return result if result is NotImplemented else not result


def _hash(self: Any) -> int:
    cls = type(self)
    _, _, hashed = _plan(cls)
    values = tuple(getattr(self, name) if key is None else key(getattr(self, name)) for name, key in hashed)
    return hash((cls.__module__, cls.__qualname__, *values))
