"""A view file in the agent's workspace (RESULTS.md, its chart), rewritten through the descriptor that created it.

Replacing a file by renaming a fresh one over it costs ext4 a flush of the new file's data
(its `auto_da_alloc` heuristic, there for editors that skip fsync): 0.15 to 0.5 ms of CPU per
write on this project's machines, twice per row. Rewriting the file this view created, in
place through its open descriptor, costs about 10 us. Before each rewrite the path is checked
to still name that file (a regular file, the same inode, one link): when the agent removed it,
replaced it or planted a link or a FIFO there, a fresh file is created under a temporary name
and renamed into place, so nothing is ever written through what the agent put at the name.

What is given up is atomicity for a reader that reads during the rewrite, which could see part
of the old page. The loop writes rows between agent turns, when no agent runs; a process killed
in the middle leaves at most a page with the old tail, and a resume rewrites both files.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

FILE_MODE = 0o644


class PageFile:
    """One file at `path` this process owns; `write` replaces its content, `close` lets it go."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1
        self._ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the file we created

    def write(self, data: bytes) -> None:
        """Make the file at `path` hold `data`; OSError when the name cannot be written."""
        if self._fd >= 0 and self._still_ours():
            _write_all(self._fd, data)
            os.ftruncate(self._fd, len(data))
            return
        self.close()
        fd = _create_renamed_into_place(self.path, data)
        st = os.fstat(fd)
        self._fd, self._ident = fd, (st.st_dev, st.st_ino)

    def _still_ours(self) -> bool:
        try:
            st = os.lstat(self.path)
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and (st.st_dev, st.st_ino) == self._ident

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._ident = -1, None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    offset = 0
    while offset < len(view):
        offset += os.pwrite(fd, view[offset:], offset)


def _create_renamed_into_place(path: Path, data: bytes) -> int:
    """A new file holding `data`, renamed to `path`; its descriptor, open for writing.

    The temporary name is predictable and the directory may be the agent's: whatever stands
    there, a link planted to carry our write elsewhere included, is removed rather than opened.
    """
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    for _ in range(3):
        try:
            fd = os.open(tmp, flags, FILE_MODE)
            break
        except FileExistsError:
            os.unlink(tmp)  # a link or a file a killed predecessor left; a directory raises here
    else:
        fd = os.open(tmp, flags, FILE_MODE)
    try:
        _write_all(fd, data)
        os.fchmod(fd, FILE_MODE)  # whatever the umask took away; on the file we made, never a link's target
        os.replace(tmp, path)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return fd
