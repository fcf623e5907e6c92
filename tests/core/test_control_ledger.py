"""The admission ledger: one admitted and at most one settled per key, idempotent ids, reload."""

from __future__ import annotations

from pathlib import Path

import pytest

from crucible_core.control.ledger import IdempotencyConflict, Ledger
from crucible_core.session_log import read_events


def lines(path: Path) -> list[dict]:
    return list(read_events(path))


def test_same_id_converges_and_a_different_payload_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "admissions.jsonl"
    ledger = Ledger(path)
    first = ledger.admit("steer", {"text": "try x"}, "pr:1")
    again = ledger.admit("steer", {"text": "try x"}, "pr:1")
    assert not first.dup and again.dup and again.entry.key == "pr:1"
    with pytest.raises(IdempotencyConflict):
        ledger.admit("steer", {"text": "try y"}, "pr:1")
    assert [e["kind"] for e in lines(path)] == ["admitted"]
    assert ledger.settle("pr:1", "applied") and not ledger.settle("pr:1", "rejected")
    assert [e["kind"] for e in lines(path)] == ["admitted", "settled"]
    reloaded = Ledger(path)
    assert reloaded.entries["pr:1"].outcome == "applied"
    assert reloaded.admit("steer", {"text": "try x"}, "pr:1").dup
    assert reloaded.owed() == []


def test_without_id_every_delivery_is_fresh_and_owed_until_settled(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "admissions.jsonl")
    a = ledger.admit("pause", {})
    b = ledger.admit("pause", {})
    assert a.entry.key != b.entry.key and b.entry.seq == a.entry.seq + 1
    ledger.settle(a.entry.key, "superseded")
    assert [e.key for e in Ledger(tmp_path / "admissions.jsonl").owed()] == [b.entry.key]
