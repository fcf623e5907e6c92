"""contract/records.py: the shared repr, equality and hash behave as the ones attrs would have compiled."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import attrs
import pytest

import crucible_core
from crucible_core.contract import wire
from crucible_core.contract.records import value_methods


def _both(**options: Any) -> tuple[type, type]:
    """The same record twice: attrs' own methods, and value_methods'."""

    def body() -> dict[str, Any]:
        return {
            "name": attrs.field(),
            "secret": attrs.field(repr=False, default="s"),
            "shown": attrs.field(repr=lambda v: f"<{v}>", default=1),
            "ignored": attrs.field(eq=False, default=0),
            "folded": attrs.field(eq=str.lower, default="A"),
            "items": attrs.field(factory=tuple),
        }

    theirs = attrs.frozen(**options)(type("Record", (), body()))
    ours = value_methods(attrs.frozen(repr=False, eq=False, **options)(type("Record", (), body())))
    return theirs, ours


@pytest.mark.parametrize("options", [{}, {"kw_only": True}, {"slots": False}])
def test_the_shared_methods_answer_as_attrs_own_do(options: dict[str, Any]) -> None:
    theirs, ours = _both(**options)
    samples: list[dict[str, Any]] = [
        {"name": "a"},
        {"name": "a", "secret": "other", "ignored": 5},  # equal: neither field is compared
        {"name": "a", "folded": "a"},  # equal through the eq key
        {"name": "a", "folded": "b"},
        {"name": "b", "items": (1, 2)},
        {"name": float("nan")},  # nan is not equal to itself, as attrs compares
    ]
    for left in samples:
        assert repr(ours(**left)) == repr(theirs(**left))
        for right in samples:
            same = theirs(**left) == theirs(**right)
            assert (ours(**left) == ours(**right)) is same
            assert (ours(**left) != ours(**right)) is not same
            if same:
                assert hash(ours(**left)) == hash(ours(**right))
    assert hash(ours(name="a")) != hash(ours(name="b"))
    assert ours(name="a") != theirs(name="a")  # another class: never equal, as attrs has it
    assert ours(name="a").__eq__(object()) is NotImplemented


def test_a_record_inside_itself_shows_as_dots() -> None:
    @value_methods
    @attrs.frozen(repr=False, eq=False)
    class Box:
        content: list[Any]

    box = Box([])
    box.content.append(box)
    assert repr(box) == "Box(content=[...])"


def test_what_the_body_defines_is_kept_and_what_cannot_take_the_methods_is_refused() -> None:
    @value_methods
    @attrs.frozen(repr=False, eq=False)
    class Named:
        name: str

        def __repr__(self) -> str:
            return f"<{self.name}>"

    assert repr(Named("x")) == "<x>" and Named("x") == Named("x")
    mutable = value_methods(attrs.define(repr=False, eq=False)(type("Mutable", (), {"x": attrs.field()})))
    plain = attrs.define(type("Mutable", (), {"x": attrs.field()}))
    assert mutable(1) == mutable(1) and repr(mutable(1)) == repr(plain(1))
    with pytest.raises(TypeError, match="unhashable"):
        hash(mutable(1))
    with pytest.raises(TypeError, match="unhashable"):
        hash(plain(1))
    with pytest.raises(TypeError, match="exception"):
        value_methods(attrs.frozen(repr=False, eq=False)(type("Oops", (Exception,), {})))


def test_wire_events_keep_their_value_semantics() -> None:
    row = wire.RowWire(iter=1, decision="keep", note="n", detail="d", score=2.0)
    assert row == wire.RowWire(iter=1, decision="keep", note="n", detail="d", score=2.0)
    assert row != attrs.evolve(row, score=3.0)
    assert repr(row).startswith("RowWire(iter=1, decision='keep', note='n', detail='d', diff=''")
    entry = wire.EvidenceEntry("t", wire.EvidenceDisposition.PASSED)
    assert {entry, wire.EvidenceEntry("t", wire.EvidenceDisposition.PASSED)} == {entry}


def test_every_record_declared_with_the_shared_methods_opts_out_of_attrs_own() -> None:
    """`@value_methods` over an attrs decorator that still compiles repr or eq would save nothing
    (and leave attrs' methods in place): the two go together."""
    wrong = []
    for path in sorted(Path(crucible_core.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ClassDef):
                continue
            names = [ast.unparse(d) for d in node.decorator_list]
            if "value_methods" in names:
                inner = names[names.index("value_methods") + 1 :]
                if not inner or "repr=False" not in inner[0] or "eq=False" not in inner[0]:
                    wrong.append(f"{path.name}:{node.name}")
    assert wrong == []
