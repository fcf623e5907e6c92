"""Reading files below the pack directory for load() and prompt_file(), confined and counted.

A path must be relative, must not contain `..` (or `.`/empty components), every component
must be a real directory or file (no symbolic link anywhere), and the target must be a
regular file with one hard link. Size is read from the open descriptor before the bytes are,
and charged to the compile's total before it is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from crucible_workflow_starlark.bounds import Bounds


class SourceRefused(Exception):
    """A path the compiler will not read; the message says why."""


class PackSources:
    def __init__(self, pack: Path, bounds: Bounds) -> None:
        self.pack = pack
        self.bounds = bounds
        self.total = 0
        self.modules = 0

    def read(self, rel: str, *, limit: int, what: str) -> str:
        parts = self._parts(rel)
        fd = os.open(self.pack, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in parts[:-1]:
                fd = self._step(fd, part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, rel)
            # O_NONBLOCK: opening a FIFO waits for a writer that never comes
            fd = self._step(fd, parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, rel)
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise SourceRefused(f"{what} {rel!r} is not a regular file")
            if info.st_nlink != 1:
                raise SourceRefused(f"{what} {rel!r} has more than one hard link")
            if info.st_size > limit:
                raise SourceRefused(f"{what} {rel!r} is {info.st_size} bytes, over the {limit}-byte bound")
            if self.total + info.st_size > self.bounds.total_bytes:
                raise SourceRefused(
                    f"reading {rel!r} would pass the {self.bounds.total_bytes}-byte total for every "
                    "file a workflow reads"
                )
            self.total += info.st_size
            data = os.read(fd, limit + 1)
        finally:
            os.close(fd)
        if len(data) > limit:
            raise SourceRefused(f"{what} {rel!r} grew past the {limit}-byte bound while read")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise SourceRefused(f"{what} {rel!r} is not UTF-8 text") from None

    def admit_module(self, rel: str) -> None:
        if self.modules >= self.bounds.modules:
            raise SourceRefused(f"load({rel!r}) passes the bound of {self.bounds.modules} loaded modules")
        self.modules += 1

    @staticmethod
    def _parts(rel: str) -> list[str]:
        if not isinstance(rel, str) or not rel:
            raise SourceRefused("a path must be a non-empty string")
        if rel.startswith("/") or "\\" in rel or "\0" in rel:
            raise SourceRefused(f"{rel!r} must be a relative path below the pack directory")
        parts = rel.split("/")
        if any(part in ("", ".", "..") for part in parts):
            raise SourceRefused(f"{rel!r} must not contain '..', '.' or empty components")
        return parts

    @staticmethod
    def _step(fd: int, part: str, flags: int, rel: str) -> int:
        try:
            child = os.open(part, flags, dir_fd=fd)
        except FileNotFoundError:
            raise SourceRefused(f"{rel!r} does not exist below the pack directory") from None
        except NotADirectoryError:
            raise SourceRefused(f"{rel!r}: {part!r} is not a directory") from None
        except OSError as exc:
            # ELOOP is what O_NOFOLLOW reports for a symbolic link.
            raise SourceRefused(f"{rel!r}: {part!r} is a link or unreadable ({exc.strerror})") from None
        os.close(fd)  # on failure the caller closes it
        return child
