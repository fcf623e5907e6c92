"""The suite's check that every session log a test leaves ends with its `shutdown` line.

Every kind of run writes exactly one `shutdown` as its log's last line, on every path (the
session shell). A log a test deliberately leaves open (a SIGKILL it does not resume, a log it
damages or writes by hand) is marked `@pytest.mark.leaves_open_log("why")`. An empty log (a run
refused before it recorded anything) has no last line and passes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

LOG_NAME = "session.jsonl"
TAIL_BYTES = 1 << 16  # a shutdown line is short; no need to read a long log whole


def last_line(path: Path) -> bytes:
    with path.open("rb") as log:
        log.seek(0, os.SEEK_END)
        log.seek(max(0, log.tell() - TAIL_BYTES))
        lines = [line for line in log.read().splitlines() if line.strip()]
    return lines[-1] if lines else b""


def _is_crucible_log(path: Path) -> bool:
    """A file named session.jsonl that a run wrote: its first line is a crucible event. A test's
    workspace may hold a file of that name with anything in it (the agent's to write)."""
    with path.open("rb") as log:
        first = log.readline(TAIL_BYTES)
    try:
        event = json.loads(first)
    except ValueError:
        return False
    return isinstance(event, dict) and isinstance(event.get("kind"), str) and "v" in event


def open_logs(root: Path) -> list[str]:
    """Every session log under `root` (links not followed) whose last line is not a shutdown."""
    found = []
    for folder, _dirs, files in os.walk(root, followlinks=False):
        if LOG_NAME not in files:
            continue
        path = Path(folder) / LOG_NAME
        if path.is_symlink() or not path.is_file():
            continue
        line = last_line(path)
        if not line or not _is_crucible_log(path):
            continue
        try:
            kind = json.loads(line).get("kind")
        except (ValueError, AttributeError):
            kind = None
        if kind != "shutdown":
            found.append(f"{path} ends with {kind or 'an unreadable line'!s}")
    return found
