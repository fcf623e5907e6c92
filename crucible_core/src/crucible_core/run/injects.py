"""Copying [workspace].inject files into the workspace: all of them at setup, frozen ones before every measure.

The workspace is the agent's: anything standing at or above an inject destination may be a
hostile edit (a hardlink to the session log, a symlink to a directory outside the workspace).
So a copy never writes through an existing directory entry and never follows a link: every
parent directory is opened relative to the one above it without following symlinks (a link or
a file where a directory belongs is removed and replaced by a real directory), and the file is
written under a temporary name in that directory and renamed over the destination, which
replaces a hardlink instead of writing through it.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

from crucible_core.errors import RunFailed
from crucible_core.manifest.loader import ResolvedInject

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


def _parts(destination: str) -> list[str]:
    parts = [part for part in destination.split("/") if part not in ("", ".")]
    if not parts or ".." in parts:
        raise RunFailed(
            f"inject destination {destination!r} does not name a path inside the workspace",
            hint="give [workspace].inject a dst relative to the workspace, without '..'",
        )
    return parts


def _open_real_dir(parent_fd: int, name: str) -> int:
    """Open `name` under `parent_fd` as a real directory, replacing whatever else stands there."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
        # A symlink or a file where a directory belongs: the agent's edit, never followed.
        os.unlink(name, dir_fd=parent_fd)
    os.mkdir(name, 0o777, dir_fd=parent_fd)
    return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)


def _open_parent(workspace: Path, parts: list[str]) -> int:
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[:-1]:
            child = _open_real_dir(fd, name)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _install(source: Path, dir_fd: int, name: str) -> None:
    """Write `source` as `name` in the directory `dir_fd`: a fresh file renamed over the old entry."""
    src_stat = os.stat(source)
    tmp = f".{name}.crucible-inject-{os.getpid()}"
    with suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=dir_fd)
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd
    )
    try:
        try:
            with open(source, "rb") as src:
                while chunk := src.read(_CHUNK):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view) :]
            os.fchmod(fd, stat.S_IMODE(src_stat.st_mode))
            os.utime(fd, ns=(src_stat.st_atime_ns, src_stat.st_mtime_ns))
        finally:
            os.close(fd)
        try:
            existing = os.lstat(name, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISDIR(existing.st_mode):
                # A real directory where the file belongs: the agent's; rmtree never follows links.
                shutil.rmtree(name, dir_fd=dir_fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def copy_injects(entries: Iterable[ResolvedInject], workspace: Path) -> list[str]:
    """Copy each entry to its destination (mode bits kept); return the destinations written."""
    written: list[str] = []
    for entry in entries:
        parts = _parts(entry.destination)
        dir_fd = _open_parent(workspace, parts)
        try:
            _install(entry.source, dir_fd, parts[-1])
        finally:
            os.close(dir_fd)
        written.append(entry.destination)
    return written


def _intact(entry: ResolvedInject, workspace: Path) -> bool:
    """Whether the workspace copy is the source's own file, reached through real directories only."""
    parts = _parts(entry.destination)
    current = workspace
    for name in parts[:-1]:
        current = current / name
        if not stat.S_ISDIR(os.lstat(current).st_mode):
            return False
    target = current / parts[-1]
    st = os.lstat(target)
    source = entry.source.stat()
    return (
        stat.S_ISREG(st.st_mode)
        and st.st_nlink == 1  # a hardlink shares its bytes with some other path: replace it
        and st.st_size == source.st_size
        and stat.S_IMODE(st.st_mode) & 0o111 == stat.S_IMODE(source.st_mode) & 0o111
        and target.read_bytes() == entry.source.read_bytes()
    )


def refresh_frozen(entries: Iterable[ResolvedInject], workspace: Path) -> list[str]:
    """Re-copy every frozen inject whose workspace copy differs, so a candidate cannot edit its gate."""
    stale: list[ResolvedInject] = []
    for entry in entries:
        if not entry.frozen:
            continue
        try:
            same = _intact(entry, workspace)
        except OSError:
            same = False
        if not same:
            stale.append(entry)
    return copy_injects(stale, workspace)
