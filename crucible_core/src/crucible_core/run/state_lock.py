"""The state directory's lock: one engine per state directory, held by the OS for the run's whole life.

A file's presence cannot say whether its writer still runs (control.json outlives a SIGKILL,
and an agent can delete it); an flock on state/engine.lock is released by the kernel the
moment its holder dies, so it answers exactly "is an engine using this directory now".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from pathlib import Path

from crucible_core.errors import WorkspaceError

LOCK_NAME = "engine.lock"
# What stands at the lock's path when opening it fails this way (never something an engine made).
_FOREIGN = {errno.EISDIR: "a directory", errno.ELOOP: "a symbolic link"}


class StateLocked(WorkspaceError):
    """Another engine holds the state directory (exit 11)."""


class StateLock:
    """An exclusive, non-blocking flock on <state dir>/engine.lock; the file records the holder's pid."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_NAME
        self._fd = -1
        self._ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the file the lock is on

    @classmethod
    def acquire(cls, state_dir: Path) -> StateLock:
        """Take the lock or raise StateLocked naming the live holder's pid."""
        lock = cls(state_dir)
        state_dir.mkdir(parents=True, exist_ok=True)
        lock._fd = lock._take()
        return lock

    def _take(self) -> int:
        # O_CLOEXEC (Python's default): a child the run starts must never inherit the lock.
        # O_NOFOLLOW and the fstat: a link or a FIFO planted there is never written through.
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as exc:
            if exc.errno in _FOREIGN:
                raise self._foreign(_FOREIGN[exc.errno]) from None
            raise WorkspaceError(
                f"cannot take the state lock {self.path}: {exc.strerror or exc}",
                hint="make the state directory writable for this user, then run the same command",
            ) from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise self._foreign("not a regular file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise StateLocked(
                f"a run on the state directory {self.path.parent} is still running "
                f"(pid {holder} holds {LOCK_NAME})",
                hint="watch it with `crucible status`, `crucible stop` it, or wait for it to end",
            ) from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._ident = (st.st_dev, st.st_ino)  # an open descriptor's file never changes: no fstat per check
        return fd

    def _foreign(self, why: str) -> WorkspaceError:
        """Something the engine did not make stands at the lock's path (a directory, a link)."""
        return WorkspaceError(
            f"cannot take the state lock {self.path}: {why}",
            hint="remove it: an engine's lock is always a regular file crucible makes, so no run holds "
            "this one; the next run makes a fresh lock file",
        )

    def held_in_place(self) -> bool:
        """True while the lock file at its path is the one this engine holds."""
        try:
            on_disk = os.stat(self.path)
        except OSError:
            return False
        return (on_disk.st_dev, on_disk.st_ino) == self._ident

    def reassert(self) -> bool:
        """Re-take the lock on a fresh file when its file was deleted or replaced; True if it had to.

        Raises StateLocked when another engine took the directory meanwhile.
        """
        if self._fd < 0 or self.held_in_place():
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = self._take()
        os.close(self._fd)
        self._fd = fresh
        return True

    def release(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


def _read_pid(fd: int, *, attempts: int = 50, pause: float = 0.01) -> str:
    """The holder's pid as its lock file says, or "?".

    The holder writes its pid just after it takes the lock, so an engine refused in that
    instant can find the file still empty: it looks again for a moment (bounded, 0.5 s).
    """
    for attempt in range(attempts):
        try:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        except OSError:
            return "?"
        if text.isdigit():
            return text
        if attempt + 1 < attempts:
            time.sleep(pause)
    return "?"
