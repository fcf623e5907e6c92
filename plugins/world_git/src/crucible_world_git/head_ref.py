"""Moving HEAD (and the branch it names) as `git commit` / `git reset` do: lock, write, rename, log.

dulwich's ref update fsyncs every ref file; git by default does not (core.fsync leaves refs
out), and on a slow disk that one fsync costs more than the whole rest of a small snapshot.
This handles the shape every workspace has (HEAD naming a loose or packed branch, or a
detached HEAD) and reports anything else so the caller can fall back to dulwich.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

ZERO = b"0" * 40


class Unsupported(Exception):
    """A ref layout this module leaves to dulwich (reftable, symref chains)."""


def _packed_value(commondir: Path, name: bytes) -> bytes | None:
    try:
        data = (commondir / "packed-refs").read_bytes()
    except FileNotFoundError:
        return None
    for line in data.splitlines():
        if line[:1] in (b"#", b"^"):
            continue
        sha, _, ref = line.partition(b" ")
        if ref == name:
            return sha
    return None


def _current(path: Path, name: bytes, commondir: Path) -> bytes | None:
    try:
        value = path.read_bytes().strip()
    except FileNotFoundError:
        return _packed_value(commondir, name)
    if value.startswith(b"ref: "):
        raise Unsupported(f"{name!r} is itself a symbolic ref")
    return value


def _log(path: Path, old: bytes | None, new: bytes, identity: bytes, message: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    line = b"%s %s %s %d +0000\t%s\n" % (
        old or ZERO,
        new,
        identity,
        int(time.time()),
        message.replace(b"\n", b" "),
    )
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        # A symlink where the log belongs (the agent's): appending would write wherever it points.
        os.unlink(path)
        fd = os.open(path, flags, 0o666)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def move_head(
    controldir: Path, commondir: Path, old: bytes | None, new: bytes, identity: bytes, message: bytes
) -> bool:
    """Point HEAD's branch (or a detached HEAD) at `new` if it still holds `old`; False if not.

    Raises Unsupported for layouts this module does not write.
    """
    if (commondir / "reftable").exists():
        raise Unsupported("reftable ref storage")
    head = (controldir / "HEAD").read_bytes().strip()
    if head.startswith(b"ref: "):
        name = head[5:].strip()
        if not name.startswith(b"refs/") or b".." in name:
            raise Unsupported(f"HEAD names {name!r}")
        path = commondir / os.fsdecode(name)
    else:
        name = b"HEAD"
        path = controldir / "HEAD"
    if _current(path, name, commondir) != old:
        return False
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
    # git logs the branch and HEAD alike; a missing log directory just starts the log.
    if name != b"HEAD":
        _log(commondir / "logs" / os.fsdecode(name), old, new, identity, message)
    _log(controldir / "logs" / "HEAD", old, new, identity, message)
    return True
