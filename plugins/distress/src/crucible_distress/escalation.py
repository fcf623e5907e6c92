"""The escalate hatch (ADR 0001): the agent's ESCALATION.json marker, written by `crucible escalate` and taken after the turn."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path

from crucible_core.api import (
    MAX_MARKER_BYTES,
    MAX_MARKER_DEPTH,
    AgentFileRefused,
    Escalated,
    JsonRefused,
    UsageError,
    loads_bounded,
    read_regular,
    write_atomic,
)

CATEGORIES = ("harness-limitation", "infeasible", "needs-info")
MARKER_NAME = "ESCALATION.json"


def make(category: str, reason: str, evidence: tuple[str, ...]) -> Escalated:
    """Validate what an agent asks to escalate; an empty reason is not an escalation."""
    if category not in CATEGORIES:
        raise UsageError(f"unknown category {category!r}", hint=f"use one of {', '.join(CATEGORIES)}")
    if not reason.strip():
        raise UsageError("an escalation needs a reason", hint="say why no change here can be judged fairly")
    return Escalated(category, reason.strip(), tuple(e for e in evidence if e.strip()))


def write_marker(workspace: Path, escalation: Escalated) -> Path:
    path = workspace / MARKER_NAME
    record = {
        "category": escalation.category,
        "reason": escalation.reason,
        "evidence": list(escalation.evidence),
        "ts": round(time.time(), 3),
    }
    write_atomic(path, (json.dumps(record, indent=2) + "\n").encode("utf-8"))
    return path


def parse_marker(data: bytes) -> Escalated:
    """Read a marker; one that is malformed still escalates (the agent meant to stop), saying so.

    The parse is bounded (size, nesting) and refuses text no writer accepts (a lone surrogate).
    """
    try:
        record = loads_bounded(data, max_chars=MAX_MARKER_BYTES, max_depth=MAX_MARKER_DEPTH)
    except JsonRefused as exc:
        return Escalated(
            "needs-info", f"{MARKER_NAME} was not usable: {exc}", (data[:2000].decode("utf-8", "replace"),)
        )
    if not isinstance(record, dict):
        return Escalated("needs-info", "ESCALATION.json was not a JSON object")
    category = record.get("category")
    reason = record.get("reason")
    evidence = record.get("evidence") or []
    if isinstance(evidence, str):
        evidence = [evidence]
    return Escalated(
        category if category in CATEGORIES else "needs-info",
        reason.strip() if isinstance(reason, str) and reason.strip() else "(no reason given)",
        tuple(str(e) for e in evidence if isinstance(e, str | int | float)),
    )


def take_marker(path: Path, keep_copy: Path, redact: Callable[[str], str] = str) -> Escalated | None:
    """Consume the marker (moved to the state directory, so a resume cannot trip over it again).

    The kept copy is evidence the run writes, so it goes through `redact` like the session log.
    Whatever stands at the path escalates: one that is not a small regular file (a FIFO, a
    link, a directory) is never opened blocking nor followed, and the reason says what it was.
    """
    try:
        data = read_regular(path, MAX_MARKER_BYTES)
    except FileNotFoundError:
        return None
    except AgentFileRefused as exc:
        with contextlib.suppress(OSError):  # a directory cannot be unlinked: it stays, named in the reason
            path.unlink()
        return Escalated("needs-info", f"{MARKER_NAME} could not be read: {exc}")
    write_atomic(keep_copy, redact(data.decode("utf-8", "replace")).encode("utf-8"))
    path.unlink(missing_ok=True)
    return parse_marker(data)
