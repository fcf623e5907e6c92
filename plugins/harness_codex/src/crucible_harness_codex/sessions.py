"""Which logical sessions already had their codex turn: the second turn of one is an error, never a fresh start.

`codex exec resume` is not wired, so a logical session ([agent].session) cannot continue a
conversation. Starting a new one under the same name would pass it off as the old one; the
harness refuses instead. A session counts as used once its first turn's stream began (a turn
that never started may be retried). The marks are mode-0600 files in the run's private state.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import attrs


@attrs.frozen
class SessionMarks:
    root: Path  # a 0700 directory under the run's private state

    @classmethod
    def under(cls, private_dir: Path) -> SessionMarks:
        return cls(private_dir / "sessions" / "codex")

    def path_of(self, session: str) -> Path:
        return self.root / f"session-{hashlib.sha256(session.encode('utf-8')).hexdigest()[:32]}.json"

    def used(self, session: str) -> bool:
        return self.path_of(session).exists()

    def mark(self, session: str) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        for folder in (self.root.parent, self.root):
            os.chmod(folder, 0o700)
        fd = os.open(self.path_of(session), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, json.dumps({"session": session, "turns": 1}).encode())
        finally:
            os.close(fd)

    def refusal(self, session: str) -> str:
        return (
            f"logical session {session!r} already had its codex turn, and the codex harness cannot resume "
            "a conversation: remove [agent].session to start each turn afresh, or use the claude harness "
            f"(delete {self.path_of(session)} to start this session over)"
        )
