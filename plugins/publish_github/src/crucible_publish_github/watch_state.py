"""What `crucible watch-pr` remembers across restarts: the comments it acted on and those it refused.

One JSON file, replaced atomically after each change, so a comment acted on is never acted on
again by a later watcher; a lock beside it keeps two watchers from sharing one file. A refusal
is remembered so it is reported once; it is not final: a comment whose author is allowed later
is acted on then.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from crucible_core.api import AgentFileRefused, WorkspaceError, read_regular, write_atomic

MAX_STATE_BYTES = 64 * 1024 * 1024
VERSION = 1


@attrs.define
class WatchState:
    path: Path
    acted: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    refused: dict[str, dict[str, Any]] = attrs.field(factory=dict)

    @classmethod
    def load(cls, path: Path) -> WatchState:
        try:
            data = json.loads(read_regular(path, MAX_STATE_BYTES))
        except FileNotFoundError:
            return cls(path)
        except (AgentFileRefused, OSError, ValueError) as exc:
            raise _damaged(path, str(exc)) from None
        if not isinstance(data, dict) or data.get("v") != VERSION:
            raise _damaged(path, "not a watch-pr state file")
        acted, refused = data.get("acted", {}), data.get("refused", {})
        if not isinstance(acted, dict) or not isinstance(refused, dict):
            raise _damaged(path, "its acted or refused table is not an object")
        return cls(path, dict(acted), dict(refused))

    def record_acted(self, key: str, **fields: Any) -> None:
        self.acted[key] = {"at": round(time.time(), 3), **fields}
        self.refused.pop(key, None)
        self.save()

    def record_refused(self, key: str, **fields: Any) -> None:
        self.refused[key] = {"at": round(time.time(), 3), **fields}
        self.save()

    def save(self) -> None:
        data = {"v": VERSION, "acted": self.acted, "refused": self.refused}
        try:
            write_atomic(self.path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode(), 0o600)
        except OSError as exc:
            raise WorkspaceError(
                f"cannot write the watch-pr state file {self.path}: {exc}",
                hint="without it a restart would act on comments again; fix the directory and restart",
            ) from None


def _damaged(path: Path, why: str) -> WorkspaceError:
    return WorkspaceError(
        f"cannot read the watch-pr state file {path}: {why}",
        hint="move it aside to start afresh (a live run's bridge still refuses a second steer per comment)",
    )


@contextlib.contextmanager
def held(path: Path) -> Iterator[None]:
    """Hold `<state file>.lock` for the watcher's life; a second watcher on the same file is refused."""
    lock_path = path.with_name(path.name + ".lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise WorkspaceError(f"cannot open the lock {lock_path}: {exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise WorkspaceError(
                f"another watch-pr holds {lock_path}",
                hint="stop it, or give this one its own --state-file",
            ) from None
        yield
    finally:
        os.close(fd)
