"""Moving HEAD (and the branch it names) as `git commit` / `git reset` do: lock, write, rename, log.

dulwich's ref update fsyncs every ref file; git by default does not (core.fsync leaves refs
out), and on a slow disk that one fsync costs more than the whole rest of a small snapshot.
This handles the shape every workspace has (HEAD naming a loose or packed branch, or a
detached HEAD) and reports anything else so the caller can fall back to dulwich.

Every file here is the agent's to replace, so each is read as a regular file only, never
through a link and never blocking on a FIFO (`crucible_core.agent_files.read_regular`).
"""

from __future__ import annotations

import errno
import functools
import os
import stat
import time
from pathlib import Path

from crucible_core.api import AgentFileRefused, RunFailed, read_regular
from crucible_world_git.index_file import write_in_place

ZERO = b"0" * 40
# HEAD and a loose ref hold one line; packed-refs one line per ref (a repository with a great
# many tags still fits).
_REF_BYTES = 4096
PACKED_REFS_BYTES = 256 << 20


class Unsupported(Exception):
    """A ref layout this module leaves to dulwich (reftable, symref chains)."""


class Unreadable(RunFailed):
    """A ref file that is not a regular file (a FIFO, a link, a directory) or is oversized."""

    def __init__(self, message: str) -> None:
        super().__init__(
            message,
            hint="the workspace repository is damaged: resume the run to rebuild it from the engine's record",
        )


@functools.lru_cache(maxsize=64)
def _join(directory: Path, name: str) -> Path:
    """`directory / name`, made once: HEAD and its branch are read several times per operation."""
    return directory / name


def read_ref_file(path: Path, max_bytes: int = _REF_BYTES) -> bytes | None:
    """A ref file's bytes; None when absent; Unreadable for anything but a small regular file."""
    try:
        return read_regular(path, max_bytes)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except AgentFileRefused as exc:
        raise Unreadable(f"{path.name} is {exc}") from None


def _packed_value(commondir: Path, name: bytes) -> bytes | None:
    data = read_ref_file(_join(commondir, "packed-refs"), PACKED_REFS_BYTES)
    if data is None:
        return None
    for line in data.splitlines():
        if line[:1] in (b"#", b"^"):
            continue
        sha, _, ref = line.partition(b" ")
        if ref == name:
            return sha
    return None


def _current(path: Path, name: bytes, commondir: Path) -> bytes | None:
    data = read_ref_file(path)
    if data is None:
        return _packed_value(commondir, name)
    value = data.strip()
    if value.startswith(b"ref: "):
        raise Unsupported(f"{name!r} is itself a symbolic ref")
    return value


def _head_target(controldir: Path, commondir: Path) -> tuple[bytes, Path]:
    """(the ref name HEAD names, or b"HEAD" when detached; the file that holds its value)."""
    if _join(commondir, "reftable").exists():
        raise Unsupported("reftable ref storage")
    data = read_ref_file(_join(controldir, "HEAD"))
    if data is None:
        raise Unreadable("HEAD is missing")
    head = data.strip()
    if head.startswith(b"ref: "):
        name = head[5:].strip()
        if not name.startswith(b"refs/") or b".." in name:
            raise Unsupported(f"HEAD names {name!r}")
        return name, _join(commondir, os.fsdecode(name))
    return b"HEAD", _join(controldir, "HEAD")


def read_head(controldir: Path, commondir: Path) -> bytes | None:
    """The commit id (hex) HEAD resolves to, or None on an unborn branch.

    Raises Unsupported for layouts left to dulwich, Unreadable for a ref file that is not one.
    """
    name, path = _head_target(controldir, commondir)
    return _current(path, name, commondir)


def packed_refs_problem(commondir: Path) -> str | None:
    """Why packed-refs would stop git reading the repository (not a file, not packed refs), or None."""
    try:
        data = read_ref_file(_join(commondir, "packed-refs"), PACKED_REFS_BYTES)
    except Unreadable as exc:
        return str(exc)
    if data is None:
        return None
    for number, line in enumerate(data.splitlines(), 1):
        if not line or line.startswith(b"#"):
            continue
        sha, space, ref = line[1:].partition(b" ") if line[:1] == b"^" else line.partition(b" ")
        if len(sha) != 40 or not _is_hex(sha) or bool(space) == (line[:1] == b"^") or (space and not ref):
            return f"packed-refs line {number} is not a packed ref"
    return None


def _is_hex(text: bytes) -> bool:
    return all(ch in b"0123456789abcdef" for ch in text)


def _open_dir(parent: int, name: str) -> int:
    """The directory `name` below `parent`, made if missing; whatever else stands there is replaced."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        os.unlink(name, dir_fd=parent)  # a link or a file where a log directory belongs (the agent's)
    os.mkdir(name, 0o777, dir_fd=parent)
    return os.open(name, flags, dir_fd=parent)


def append_log(gitdir: Path, name: str, line: bytes) -> None:
    """Append `line` to the log `logs/<name>` under `gitdir`, never through a link, FIFO or shared file.

    Each directory on the way is opened without following links, and the log itself must be a
    regular file of its own: a symbolic link, a FIFO, or a hard link to a file elsewhere (the
    agent's, to make the engine write outside the workspace) is replaced by a fresh log. A
    directory standing there is left alone and the line is dropped: a reflog is a courtesy.
    """
    *parents, leaf = ("logs/" + name).split("/")
    fd = os.open(gitdir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parents:
            inner = _open_dir(fd, part)
            os.close(fd)
            fd = inner
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            log = os.open(leaf, flags, 0o666, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.EISDIR:
                return
            if exc.errno not in (errno.ELOOP, errno.ENXIO):  # a link; a FIFO nobody reads
                raise
            log = -1
        if log >= 0:
            st = os.fstat(log)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                os.close(log)
                log = -1
        if log < 0:
            os.unlink(leaf, dir_fd=fd)
            log = os.open(leaf, flags | os.O_EXCL, 0o666, dir_fd=fd)
        try:
            os.write(log, line)
        finally:
            os.close(log)
    finally:
        os.close(fd)


def log_line(old: bytes | None, new: bytes, identity: bytes, message: bytes) -> bytes:
    """One reflog line as git writes it."""
    return b"%s %s %s %d +0000\t%s\n" % (
        old or ZERO,
        new,
        identity,
        int(time.time()),
        message.replace(b"\n", b" "),
    )


def move_head(
    controldir: Path, commondir: Path, old: bytes | None, new: bytes, identity: bytes, message: bytes
) -> bool:
    """Point HEAD's branch (or a detached HEAD) at `new` if it still holds `old`; False if not.

    Raises Unsupported for layouts this module does not write, Unreadable for a ref file that
    is not a regular file.
    """
    name, path = _head_target(controldir, commondir)
    if _current(path, name, commondir) != old:
        return False
    # The branch's file as it stands, written over when it still holds `old` (no lock file to
    # create: see index_file.write_in_place); else git's way.
    in_place = (
        old is not None and write_in_place(os.fsencode(path), new + b"\n", expected=old + b"\n") is not None
    )
    if not in_place and not _replace_locked(path, name, commondir, old, new):
        return False
    # git logs the branch and HEAD alike; a missing log directory just starts the log.
    line = log_line(old, new, identity, message)
    if name != b"HEAD":
        append_log(commondir, os.fsdecode(name), line)
    append_log(controldir, "HEAD", line)
    return True


def _replace_locked(path: Path, name: bytes, commondir: Path, old: bytes | None, new: bytes) -> bool:
    """Write the ref at `path` through git's lock file and a rename; False if it moved off `old`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        os.write(fd, new + b"\n")
    finally:
        os.close(fd)
    try:
        if _current(path, name, commondir) != old:  # someone moved it between our check and the lock
            os.unlink(lock)
            return False
        os.replace(lock, path)
    except BaseException:
        if lock.exists():
            os.unlink(lock)
        raise
    return True
