"""The distress channel: the agent pages a human (error suspends the run; warn and info leave notes).

`crucible distress` (and the broker's distress tool) writes here on the agent's side; the loop
reads here at its own safe points, through this plugin's AgentSignals (signals.py). Both meet in one directory the engine names in $CRUCIBLE_DISTRESS_DIR: the
`distress` marker (present means "suspended until a human looks"; deleting it is the resume
grant) and `distress-notes.jsonl` (warn/info notes, consumed onto the next row).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crucible_core.api import (
    MAX_MARKER_BYTES,
    MAX_MARKER_DEPTH,
    AgentFileRefused,
    AgentNote,
    JsonRefused,
    UsageError,
    WorkspaceError,
    loads_bounded,
    read_regular,
    write_atomic,
)

SEVERITIES = ("error", "warn", "info")
MARKER_NAME = "distress"
NOTES_NAME = "distress-notes.jsonl"
ENV_DIR = "CRUCIBLE_DISTRESS_DIR"
# The approval_wait handle of a distress suspend: how the park, the resume and `status` tell it apart.
HANDLE = "distress"
# Pending warn/info notes taken at once: a page is a few lines, so this is hundreds of them.
MAX_NOTES_BYTES = 1024 * 1024


def make(severity: str, reason: str, evidence: tuple[str, ...], iteration: int | None) -> AgentNote:
    """Validate what the agent raises; a page without a reason tells the human nothing."""
    if severity not in SEVERITIES:
        raise UsageError(f"unknown severity {severity!r}", hint=f"use one of {', '.join(SEVERITIES)}")
    if not reason.strip():
        raise UsageError("a distress call needs a reason", hint="say what is wrong and what you tried")
    return AgentNote(severity, reason.strip(), tuple(e for e in evidence if e.strip()), iteration)


def marker_path(directory: Path) -> Path:
    return directory / MARKER_NAME


def notes_path(directory: Path) -> Path:
    return directory / NOTES_NAME


# -- the agent's side -------------------------------------------------------------------------
def raise_error(directory: Path, distress: AgentNote) -> bool:
    """Write the marker; False when it was already there (a repeat while suspended is a no-op).

    Raises WorkspaceError when the marker cannot be written: then nothing is suspended, and
    the caller must not say otherwise.
    """
    marker = marker_path(directory)
    if marker.exists():
        return False
    record = {**distress.to_wire(), "ts": round(time.time(), 3)}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(marker, (json.dumps(record, indent=2) + "\n").encode("utf-8"))
    except OSError as exc:
        raise WorkspaceError(
            f"could not write the distress marker {marker}: {exc}; the run is NOT suspended",
            hint="say so in your turn's output, or use `crucible escalate` to end the run instead",
        ) from None
    return True


def add_note(directory: Path, distress: AgentNote) -> Path:
    """Append a warn/info note in one write (the loop takes the file whole after the turn)."""
    path = notes_path(directory)
    line = json.dumps({"v": 1, **distress.to_wire(), "ts": round(time.time(), 3)}) + "\n"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)
    except OSError as exc:
        raise WorkspaceError(
            f"could not write the distress note to {path}: {exc}; nothing was recorded",
            hint="mention it in your turn's output instead",
        ) from None
    return path


# -- the loop's side --------------------------------------------------------------------------
def read_marker(directory: Path) -> dict[str, Any] | None:
    """The marker's record when it is present; a malformed one still suspends (the agent meant to).

    The agent can reach the state directory, so the marker is read like any file it wrote: a
    FIFO, a link or a huge file there suspends with a reason, it is never opened blocking nor
    followed; the JSON is bounded and its text valid.
    """
    try:
        record = loads_bounded(
            read_regular(marker_path(directory), MAX_MARKER_BYTES),
            max_chars=MAX_MARKER_BYTES,
            max_depth=MAX_MARKER_DEPTH,
        )
    except FileNotFoundError:
        return None
    except (AgentFileRefused, JsonRefused) as exc:
        return {"severity": "error", "reason": f"(the distress marker could not be read: {exc})"}
    if not isinstance(record, dict):
        return {"severity": "error", "reason": "(the distress marker is not a JSON object)"}
    return record


def redact_marker(directory: Path, redact: Callable[[str], str]) -> None:
    """Rewrite the agent's marker through the run's redaction: it stays in the state directory
    until a human answers, and that directory holds no secret the engine handed out."""
    marker = marker_path(directory)
    try:
        text = read_regular(marker, MAX_MARKER_BYTES).decode("utf-8", "replace")
    except (FileNotFoundError, AgentFileRefused):
        return  # nothing a secret could have been read from
    clean = redact(text)
    if clean != text:
        write_atomic(marker, clean.encode("utf-8"))


def take_notes(directory: Path) -> list[AgentNote]:
    """Consume the pending notes: renamed away first, so a late append starts a new file.

    Raises AgentFileRefused (the file is consumed all the same) when what was there is not a
    regular file of at most MAX_NOTES_BYTES: a FIFO is never opened blocking, a link never followed.
    """
    path = notes_path(directory)
    taken = path.with_name(f".{path.name}.taken")
    try:
        os.replace(path, taken)
    except (FileNotFoundError, NotADirectoryError):
        return []
    try:
        return _decode_notes(read_regular(taken, MAX_NOTES_BYTES))
    finally:
        taken.unlink(missing_ok=True)


def _decode_notes(data: bytes) -> list[AgentNote]:
    notes = []
    for raw in data.splitlines():
        try:
            record = loads_bounded(raw, max_chars=MAX_MARKER_BYTES, max_depth=MAX_MARKER_DEPTH)
        except JsonRefused:
            continue  # a torn (or hostile) line: the rest still reach the row
        if isinstance(record, dict) and record.get("severity") in ("warn", "info"):
            evidence = tuple(str(e) for e in record.get("evidence") or [] if isinstance(e, str))
            iteration = record.get("iter")
            notes.append(
                AgentNote(
                    record["severity"],
                    str(record.get("reason") or ""),
                    evidence,
                    iteration if isinstance(iteration, int) else None,
                )
            )
    return notes
