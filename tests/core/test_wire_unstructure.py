"""The wire's own unstructure functions (contract/wire.py `to_fields`) write what the cattrs converter writes.

wire.py writes each record's unstructure function from its field annotations instead of having
cattrs generate it (a run's start-up, issue 27); every kind, every agent event and every nested
record is held here to the converter's output: the same keys in the same order, the same values.
"""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import attrs
import pytest

from crucible_core.contract import wire

NESTED = (
    wire.EvidenceEntry,
    wire.RowWire,
    wire.PrLinkWire,
    wire.PlanTaskWire,
    wire.ArtifactWire,
    wire.Ask,
    wire.ComponentIdentity,
    wire.RigIdentity,
    wire.RunIdentity,
    wire.ModelUsage,
    wire.ServiceIdentity,
)
ALL_CLASSES = (*wire.KINDS.values(), *wire.AGENT_KINDS.values(), wire.Unknown, *NESTED)
ENUMS = {
    "EvidenceDisposition": wire.EvidenceDisposition.FAILED,
    "RawStream": wire.RawStream.STDERR,
    "RecoveryClass": wire.RecoveryClass.DIED_MID_TURN,
    "SessionAction": wire.SessionAction.RESUMED,
}


def _sample(declared: Any, variant: int) -> Any:
    """A value of the annotation: variant 0 empty, 1 ordinary, 2 awkward (a non-finite float, nested data)."""
    annotation = wire.annotation_text(declared)
    assert annotation is not None, declared
    optional = annotation.endswith(" | None")
    base = annotation.removesuffix(" | None")
    if optional and variant == 0:
        return None
    if base == "str":
        return ["", "value", 'ünï\n"code"'][variant]
    if base == "int":
        return [0, 7, -3][variant]
    if base == "bool":
        return [False, True, True][variant]
    if base == "float":
        return [0.0, 2.5, math.nan][variant] if variant != 2 or not optional else math.inf
    if base in ENUMS:
        return ENUMS[base]
    if base == "Any":
        return [None, {"a": [1, 2.0, "x"]}, [math.nan, {"b": None}]][variant]
    if base.startswith("dict["):
        return [{}, {"k": "v"}, {"k": "v", "n": "w"}][variant]
    if base.startswith("list["):
        inner = base[5:-1]
        return [] if variant == 0 else [_sample(inner, 1), _sample(inner, variant)]
    if base == "AgentEvent":
        return [
            wire.AgentText(delta="hi"),
            wire.AgentTool(name="t", input={"x": 1.5}),
            wire.AgentRaw(text="r", stream=wire.RawStream.STDOUT),
        ][variant]
    nested = getattr(wire, base)
    return _instance(nested, variant)


def _instance(cls: type, variant: int) -> Any:
    values: dict[str, Any] = {}
    for field in attrs.fields(cls):
        if variant == 0 and field.default is not attrs.NOTHING:
            continue  # the default: omitted where the field is omittable
        values[field.name] = _sample(field.type, variant)
    if cls is wire.Ask:
        values = {"key": "k1", "workflow": "wf", "params": values.get("params")}
    return cls(**values)


def _converters(event: Any) -> dict[str, Any]:
    return wire.converter.unstructure(event, type(event))  # type: ignore[no-any-return]


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda cls: cls.__name__)
def test_every_record_is_written_as_the_converter_writes_it(cls: type) -> None:
    for variant in (0, 1, 2):
        record = _instance(cls, variant)
        written = wire._unstructurer(cls)
        assert written.__code__.co_filename.startswith("<wire unstructure")  # not the converter's
        ours = written(record)
        theirs = _converters(record)
        assert list(ours) == list(theirs)
        assert json.dumps(ours) == json.dumps(theirs)  # nan written as null by both, nested values alike


def test_a_record_whose_omittable_fields_are_set_but_at_their_default_leaves_them_out() -> None:
    row = wire.RowWire(iter=1, decision="keep", note="", detail="", evidence=[], distress=[], samples=[])
    assert list(wire._unstructurer(wire.RowWire)(row)) == list(_converters(row))
    assert "evidence" not in wire.to_fields(wire.Row(row=row, solved=None))["row"]


def test_whole_lines_are_unchanged() -> None:
    """encode() over every kind: the envelope and the empty-field rules on top of the fields."""
    for cls, variant in itertools.product(wire.KINDS.values(), (0, 1, 2)):
        event = _instance(cls, variant)
        fields = _converters(event)
        expected = {k: v for k, v in fields.items() if not (wire._is_empty(v) and wire._omittable(cls, k, v))}
        expected.pop("kind", None)
        line = json.loads(wire.encode(event, ts=1.5, seq=3))
        assert line == {"v": 1, "seq": 3, "ts": 1.5, "kind": cls.KIND, **expected}  # type: ignore[attr-defined]
        decoded = wire.decode(wire.encode(event))
        assert decoded is None or type(decoded) is cls


def test_a_class_whose_annotations_cattrs_resolved_still_gets_the_written_function() -> None:
    """Structuring a class through the converter (a resume decodes before it writes) turns its
    annotation text into types; the written function is made from those as well."""
    for cls in ALL_CLASSES:
        attrs.resolve_types(cls, globalns=vars(wire))
        assert wire._write_unstructurer(cls).__code__.co_filename.startswith("<wire unstructure"), cls


HOSTILE = (None, "x", "", 1, 0, 1.5, -0.0, True, [], {}, ["x"], [1.5], {"k": 1}, {"kind": "text", "delta": 1})


def _outcome(structure: Any, obj: Any, cls: type) -> str:
    try:
        return "made " + repr(structure(obj, cls))
    except Exception:  # the decoder skips the line, whatever the exception
        return "refused"


def _variants(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The object itself, then each key missing, each key holding each hostile value, an unknown
    key, and the same one level down for each nested object."""
    found = [obj, {**obj, "unknown_key": 1}]
    for key, value in obj.items():
        found.append({k: v for k, v in obj.items() if k != key})
        found.extend({**obj, key: bad} for bad in HOSTILE)
        if isinstance(value, dict):
            found.extend({**obj, key: inner} for inner in _variants(value)[1:])
    return found


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda cls: cls.__name__)
def test_every_record_is_read_as_the_converter_reads_it_and_refused_where_it_refuses(cls: type) -> None:
    written = wire._structurer(cls)
    assert written.__code__.co_filename.startswith("<wire structure")  # not the converter's
    for variant in (0, 1, 2):
        line = wire.converter.unstructure(_instance(cls, variant), cls)
        for obj in _variants(line):
            assert _outcome(written, obj, cls) == _outcome(wire.converter.structure, obj, cls), obj


def test_a_decoded_record_built_without_its_init_is_the_record_its_init_builds() -> None:
    """Decoding fills a plain record's attributes in directly (a row's frozen __init__ cost a
    fifth of a resume's fold): the record is equal, with the same attributes, and as frozen as one its
    __init__ builds; a record whose __init__ checks or converts its arguments still goes through it."""
    row = wire.RowWire(iter=3, decision="keep", note="n", detail="d", score=1.5, kept_snap="a" * 40)
    line = wire.converter.unstructure(row, wire.RowWire)
    decoded = wire._structurer(wire.RowWire)(line, wire.RowWire)
    assert wire._built_directly(wire.RowWire)
    assert decoded == row and vars(decoded) == vars(row)
    assert decoded.evidence is not row.evidence  # a factory's default is made per record
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        decoded.note = "changed"  # type: ignore[misc]
    checked = [cls for cls in ALL_CLASSES if any(f.validator or f.converter for f in attrs.fields(cls))]
    assert checked and not any(wire._built_directly(cls) for cls in checked)
