"""File requests from the agent (fs/read_text_file, fs/write_text_file) answered inside the workspace only.

The path is walked one component at a time from an open descriptor of the workspace, each
directory opened without following a link, so nothing the agent plants (a symbolic link, a
directory swapped for one mid-request) can carry a read or a write out of it. The file itself
must be a regular file with one name (a hard link to a file elsewhere is refused: writing
through it would change that file). Reads and writes are bounded. The repository's `.git`
directory is never written: it is the world's record, not the agent's.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

# The largest file a request may read or write: text a turn needs fits, a log of gigabytes does not.
MAX_FILE_BYTES = 4 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Refused(Exception):
    """The request cannot be answered; the message says why in a few words (the agent reads it)."""


def relative_parts(workspace: Path, path: str) -> tuple[str, ...]:
    """The workspace-relative components of an absolute path the agent names, or Refused."""
    if not path or "\0" in path:
        raise Refused("not a path")
    candidate = PurePosixPath(path)
    if not candidate.is_absolute():
        raise Refused(f"{path} is not an absolute path")
    parts = candidate.parts[1:]
    if ".." in parts:
        raise Refused(f"{path} climbs with '..'")
    root = PurePosixPath(workspace).parts[1:]
    if tuple(parts[: len(root)]) != root or len(parts) == len(root):
        raise Refused(f"{path} is outside the workspace")
    return tuple(p for p in parts[len(root) :] if p not in ("", "."))


@contextlib.contextmanager
def _parent_dir(workspace: Path, parts: tuple[str, ...], *, create: bool) -> Iterator[int]:
    """An open descriptor of the directory holding parts[-1], reached without following any link."""
    fd = os.open(workspace, _DIR_FLAGS)
    try:
        for name in parts[:-1]:
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise Refused(f"{name}: no such directory") from None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
                nxt = _open_dir(name, fd)
            except OSError as exc:
                raise _refusal(name, exc) from None
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def _open_dir(name: str, parent: int) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise _refusal(name, exc) from None


def _refusal(name: str, exc: OSError) -> Refused:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return Refused(f"{name} is a link or not a directory (links are never followed)")
    return Refused(f"{name}: {exc.strerror}")


def _check_regular(fd: int, name: str) -> os.stat_result:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise Refused(f"{name} is not a regular file")
    if info.st_nlink > 1:
        raise Refused(f"{name} has more than one name (a hard link is never followed)")
    return info


def read_text(workspace: Path, path: str, line: int | None = None, limit: int | None = None) -> str:
    """The file's text (from 1-based `line`, at most `limit` lines), or Refused."""
    parts = relative_parts(workspace, path)
    with _parent_dir(workspace, parts, create=False) as parent:
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise Refused(f"{path}: no such file") from None
            raise _refusal(parts[-1], exc) from None
        try:
            info = _check_regular(fd, parts[-1])
            if info.st_size > MAX_FILE_BYTES:
                raise Refused(f"{path} is {info.st_size} bytes long (at most {MAX_FILE_BYTES} are read)")
            data = os.read(fd, MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES]
        finally:
            os.close(fd)
    text = data.decode("utf-8", errors="replace")
    if line is None and limit is None:
        return text
    lines = text.splitlines(keepends=True)
    start = max((line or 1) - 1, 0)
    end = len(lines) if limit is None else start + max(limit, 0)
    return "".join(lines[start:end])


def write_text(workspace: Path, path: str, content: str) -> None:
    """Write the file (creating it and its missing directories), or Refused."""
    parts = relative_parts(workspace, path)
    if ".git" in parts:
        raise Refused(f"{path} is inside the repository's .git directory")
    data = content.encode("utf-8")
    if len(data) > MAX_FILE_BYTES:
        raise Refused(f"{len(data)} bytes is more than the {MAX_FILE_BYTES} a write may carry")
    with _parent_dir(workspace, parts, create=True) as parent:
        try:
            # No O_TRUNC before the checks: truncating through a hard link would already change
            # the other file.
            fd = os.open(
                parts[-1],
                os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                0o644,
                dir_fd=parent,
            )
        except OSError as exc:
            raise _refusal(parts[-1], exc) from None
        try:
            _check_regular(fd, parts[-1])
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
