"""Reading a file the agent (or a measure) may have written, and looking for one it may have left: regular files only, never through a link, bounded.

Everything in the workspace is hostile input. A planted FIFO makes a plain `open()` block
forever, a symbolic or hard link carries a read out of the workspace, and a huge file costs
memory. `read_regular` opens without following a final link and without blocking, checks with
`fstat` on the open descriptor (no race between the check and the read) that it holds a regular
file, and reads at most `max_bytes`. `load_json` adds the bounded JSON parse of
`contract.json_bounds`, which also refuses text that cannot be written back out (lone
surrogates).
"""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path
from typing import Any, NamedTuple

from crucible_core.contract.json_bounds import JsonRefused, loads_bounded

# Read in chunks of this size; a regular file's reported size is not trusted (it may grow).
_CHUNK = 1 << 16
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

# What a marker the agent writes (ESCALATION.json, PROVISIONING_PENDING.json, the distress
# marker) may hold: far above any honest one, far below what could cost memory or a recursion.
MAX_MARKER_BYTES = 64 * 1024
MAX_MARKER_DEPTH = 32


class AgentFileRefused(ValueError):
    """The path holds something the engine will not read; the message says what, in a few words."""


def read_regular(path: Path | str | bytes, max_bytes: int, *, single_link: bool = False) -> bytes:
    """The bytes of the regular file at `path`, at most `max_bytes` of them.

    Raises FileNotFoundError when nothing is there (callers usually treat that as "no marker"),
    and AgentFileRefused for a symbolic link, a FIFO, a socket, a device, a directory, a file
    longer than `max_bytes`, or one that cannot be opened. `single_link=True` also refuses a
    file with more than one hard link (a capture must not take a file from outside the workspace).
    """
    try:
        fd = os.open(path, _FLAGS)
    except FileNotFoundError:
        raise
    except NotADirectoryError:  # a file stands where a parent directory belongs: nothing is there
        raise FileNotFoundError(errno.ENOENT, "no such file", os.fsdecode(path)) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise AgentFileRefused("a symbolic link (never followed)") from None
        if exc.errno == errno.ENXIO:  # a FIFO or socket with no writer, opened non-blocking
            raise AgentFileRefused("not a regular file") from None
        raise AgentFileRefused(f"cannot be opened ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise AgentFileRefused("not a regular file")
        if single_link and info.st_nlink != 1:
            raise AgentFileRefused(f"has {info.st_nlink} hard links")
        if info.st_size > max_bytes:
            raise AgentFileRefused(f"{info.st_size} bytes long (at most {max_bytes})")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise AgentFileRefused(f"longer than {max_bytes} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise AgentFileRefused(f"cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)


def is_regular(path: Path | str | bytes) -> bool:
    """True when `path` itself (not a link's target) is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def load_json(path: Path | str | bytes, *, max_bytes: int, max_depth: int) -> Any:
    """The JSON value in the agent-written file at `path`, bounded in size and nesting.

    Raises FileNotFoundError when absent, AgentFileRefused for anything that is not a small
    regular file, and JsonRefused (also a ValueError) for text that is not bounded, valid JSON.
    """
    data = read_regular(path, max_bytes)
    return loads_bounded(data, max_chars=max_bytes, max_depth=max_depth)


# -- looking for a marker the agent may have left, without a failed lookup per turn -------------
# After every agent turn the loop looks for files the agent (or an operator) may have left:
# ESCALATION.json and PROVISIONING_PENDING.json in the workspace, the distress notes and marker,
# STEER.md. Almost always none is there, and each look is a failed open, rename or unlink with an
# exception behind it. A directory's ctime moves whenever an entry is created, removed or renamed
# in it (and nobody can set a ctime back), so while the directory's device, inode and times are
# what they were before a look that found nothing, nothing can have appeared there since.
# File-system timestamps have a granularity: an entry made in the same tick as the directory's
# last change would leave its times as they were. A stamp is therefore trusted only when the
# directory's ctime is older than the moment the stamp was taken by more than that tick can be;
# a directory changed more recently than that is looked in every time.

# Many ticks of the kernel's coarse clock (at most 10 ms), which stamps a change's time.
RACY_NS = 50_000_000
# Timestamps in whole milliseconds or coarser (FAT keeps two seconds): trusted only when older.
COARSE_RACY_NS = 3_000_000_000


class Stamp(NamedTuple):
    """A directory as one stat saw it, and when (the wall clock, in nanoseconds)."""

    key: tuple[int, int, int, int]  # st_dev, st_ino, st_mtime_ns, st_ctime_ns
    taken_ns: int


class DirectoryWatch:
    """One look's memory of a directory: take a `stamp()` before looking in it, skip the look when
    `unchanged(stamp)`, and call `found_nothing(stamp)` after a look that found none of its names.

    Keep one watch per look (a look for other names in the same directory keeps its own): a stamp
    only vouches for the names the look it was taken for looked for.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._quiet: tuple[int, int, int, int] | None = None

    def stamp(self) -> Stamp | None:
        """The directory as it stands now; None when it cannot be stat-ed (then look)."""
        taken = time.time_ns()
        try:
            st = os.stat(self.directory)
        except OSError:
            return None
        return Stamp((st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns), taken)

    def unchanged(self, stamp: Stamp | None) -> bool:
        """No entry was added, removed or renamed since a look found nothing: skip this one."""
        return stamp is not None and stamp.key == self._quiet

    def found_nothing(self, stamp: Stamp | None) -> None:
        """The look made after `stamp` found none of its names: remember the stamp, if trusted."""
        self._quiet = stamp.key if stamp is not None and _outside_racy_window(stamp) else None


def _outside_racy_window(stamp: Stamp) -> bool:
    return outside_racy_window(stamp.key[3], stamp.taken_ns)


def file_status(st: os.stat_result) -> tuple[int, ...]:
    """What moves when a file is written, replaced, linked or chmod-ed (a write moves the ctime)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode, st.st_nlink)


def outside_racy_window(ctime_ns: int, taken_ns: int) -> bool:
    """A file's last change (its ctime) lies further back than a timestamp tick could hide a new
    one, seen from `taken_ns` (the wall clock before the stat): a later change moves its times.

    A ctime ahead of the clock (a skewed clock, a network file system) is never trusted.
    """
    window = COARSE_RACY_NS if ctime_ns % 1_000_000 == 0 else RACY_NS
    return taken_ns - ctime_ns > window


__all__ = [
    "MAX_MARKER_BYTES",
    "MAX_MARKER_DEPTH",
    "AgentFileRefused",
    "DirectoryWatch",
    "JsonRefused",
    "is_regular",
    "load_json",
    "read_regular",
]
