"""Resume cursors of logical sessions, kept as mode-0600 files in the run's private engine state.

A cursor is the agent program's own conversation id. It lives only here: never in the session
log, never in an event. The `agent_session` event names the logical session and says whether
a turn started or resumed it, nothing more.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import attrs

from crucible_core.api import AgentFileRefused, loads_bounded, read_regular

_SAFE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MAX_CURSOR_BYTES = 64 * 1024  # a cursor file holds one id, a count and a cost
CURSOR_MASK = "[session cursor]"


class SessionStateError(Exception):
    """A stored cursor exists but cannot be read: resuming is impossible and starting over would lie."""


@attrs.frozen
class Cursor:
    cursor: str  # opaque to crucible: the harness hands it back to its agent program
    turns: int  # completed turns of this logical session
    # What the agent program reports as the conversation's cost so far: the Claude Code CLI
    # reports a resumed conversation's cost cumulatively, and a turn costs only the difference.
    cost_usd: float = 0.0


@attrs.frozen
class SessionStore:
    """One file per logical session under `root` (a 0700 directory)."""

    root: Path

    @classmethod
    def under(cls, private_dir: Path, harness: str) -> SessionStore:
        return cls(private_dir / "sessions" / harness)

    def path_of(self, session: str) -> Path:
        if _SAFE_NAME.fullmatch(session) and not session.startswith("."):
            stem = session
        else:
            stem = "session-" + hashlib.sha256(session.encode("utf-8")).hexdigest()[:32]
        return self.root / f"{stem}.json"

    def load(self, session: str) -> Cursor | None:
        path = self.path_of(session)
        try:
            # the state directory is within a local agent's reach: a FIFO or a link planted here
            # is refused, never opened blocking nor followed
            raw = read_regular(path, MAX_CURSOR_BYTES)
        except FileNotFoundError:
            return None
        except AgentFileRefused as exc:
            raise SessionStateError(f"cannot read the cursor of session {session!r} ({path}): {exc}") from exc
        try:
            data = loads_bounded(raw, max_chars=MAX_CURSOR_BYTES, max_depth=4)
            return Cursor(str(data["cursor"]), int(data["turns"]), float(data.get("cost_usd", 0.0)))
        except (ValueError, KeyError, TypeError) as exc:
            raise SessionStateError(
                f"the cursor file of session {session!r} is damaged ({path}); "
                "delete it to start that session afresh"
            ) from exc

    def save(self, session: str, cursor: Cursor) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        for folder in (self.root.parent, self.root):
            os.chmod(folder, 0o700)
        path = self.path_of(session)
        data = json.dumps({"session": session, **attrs.asdict(cursor)}).encode()
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)


def hide_cursors(value: Any, cursors: Collection[str]) -> Any:
    """Mask cursor values wherever they appear in a JSON-like value (keys and strings).

    The agent program's own messages may quote its conversation id (an error saying which
    conversation it could not find); those messages become events and notes.
    """
    live = [c for c in cursors if c]
    if not live:
        return value
    if isinstance(value, str):
        for cursor in live:
            value = value.replace(cursor, CURSOR_MASK)
        return value
    if isinstance(value, Mapping):
        return {hide_cursors(str(k), live): hide_cursors(v, live) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [hide_cursors(v, live) for v in value]
    return value
