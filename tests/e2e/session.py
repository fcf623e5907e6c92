"""Reading a run's session log in tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crucible_core.session_log import read_events


def events(manifest: Path) -> list[dict[str, Any]]:
    return list(read_events(manifest.parent / "state" / "session.jsonl"))


def rows(manifest: Path) -> list[dict[str, Any]]:
    """The rows' nested `row` objects, as the wire writes them."""
    return [e["row"] for e in events(manifest) if e["kind"] == "row"]


def verdicts(manifest: Path) -> list[str]:
    return [r["decision"] for r in rows(manifest)]


def assert_one_trailing_shutdown(manifest: Path) -> dict[str, Any]:
    log = events(manifest)
    shutdowns = [e for e in log if e["kind"] == "shutdown"]
    assert len(shutdowns) == 1, shutdowns
    assert log[-1]["kind"] == "shutdown"
    return log[-1]
