"""Writing the engine's files into the agent's workspace: never through a link, never into a hard link.

The workspace is the agent's: anything standing at or above a destination may be a hostile edit
(a hardlink to the session log, a symlink to a directory outside the workspace). So a copy never
writes through an existing directory entry and never follows a link: every parent directory is
opened relative to the one above it without following symlinks (a link or a file where a
directory belongs is removed and replaced by a real directory), and each file is written under a
temporary name in its directory and renamed over the destination, which replaces a hardlink
instead of writing through it. Frozen injects, the harnesses' toolboxes and skills use this.

A file the engine rewrites again and again at one name where the agent can reach it (RESULTS.md,
a turn's prompt copy) is an `OwnedFile`: rewritten in place through the descriptor of the file
the engine made, while the name still leads to that file and nothing else.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from contextlib import suppress
from pathlib import Path

from crucible_core.errors import RunFailed

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


def destination_parts(destination: str) -> list[str]:
    parts = [part for part in destination.split("/") if part not in ("", ".")]
    if not parts or ".." in parts:
        raise RunFailed(
            f"{destination!r} does not name a path inside the workspace",
            hint="give a destination relative to the workspace, without '..'",
        )
    return parts


def open_real_dir(parent_fd: int, name: str) -> int:
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


def open_parent(workspace: Path, parts: list[str]) -> int:
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[:-1]:
            child = open_real_dir(fd, name)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def install_file(source: Path, dir_fd: int, name: str) -> None:
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


def copy_file_into(source: Path, workspace: Path, destination: str) -> None:
    """Copy `source` to `workspace/destination` (mode bits kept), never through what stands there."""
    parts = destination_parts(destination)
    dir_fd = open_parent(workspace, parts)
    try:
        install_file(source, dir_fd, parts[-1])
    finally:
        os.close(dir_fd)


def copy_tree_into(source: Path, workspace: Path, destination: str) -> list[str]:
    """Lay the regular files under `source` over `workspace/destination`; what else is there stays.

    The source's own links and special files are skipped (a toolbox is the manifest's, but a link
    in it could still name a file outside). Returns the workspace-relative paths written.
    """
    written: list[str] = []
    base = destination.strip("/")
    for folder, directories, files in os.walk(source):  # os.walk does not descend into links
        relative = Path(folder).relative_to(source)
        directories.sort()
        for name in sorted(files):
            path = Path(folder) / name
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            target = "/".join(p for p in (base, *relative.parts, name) if p and p != ".")
            copy_file_into(path, workspace, target)
            written.append(target)
    return written


class OwnedFile:
    """A file at `path` this process made and rewrites in place through its own descriptor.

    Making a fresh file each time costs: renaming one over the old (the atomic replace) makes
    ext4 flush the new file's data first (its `auto_da_alloc` heuristic, there for editors that
    skip fsync), and creating and unlinking a file each turn allocates and frees an inode; either
    cost 0.15 to 0.5 ms of CPU per write on this project's machines. Rewriting the file the
    engine made, through its open descriptor, costs about 10 us. Before each write the name is
    checked to still lead to that file (a regular file, the same inode, one link): when the agent
    removed it, replaced it, or put a link or a FIFO there, a fresh file is made under a
    temporary name and renamed into place, so nothing is ever written through what it put there.

    What is given up is atomicity for a reader that reads during a rewrite, which could see part
    of the old content: use it for files nobody reads while they are written (the loop writes
    them between agent turns), and that are rewritten whole after a crash.
    """

    def __init__(self, path: Path, mode: int = 0o644) -> None:
        self.path = path
        self.mode = mode
        self._fd = -1
        self._ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the file we made

    def write(self, data: bytes) -> None:
        """Make the file at `path` hold `data`; OSError when the name cannot be written."""
        ours = self._still_ours()
        if ours is not None:
            _write_all(self._fd, data)
            if ours.st_size > len(data):  # a shorter text: cut what is left of the longer one
                os.ftruncate(self._fd, len(data))
            return
        self.close()
        fd = _made_and_renamed_into_place(self.path, data, self.mode)
        st = os.fstat(fd)
        self._fd, self._ident = fd, (st.st_dev, st.st_ino)

    def empty(self) -> None:
        """Cut the file to nothing if the name still leads to it (whatever else stands there is left)."""
        ours = self._still_ours()
        if ours is not None and ours.st_size:
            os.ftruncate(self._fd, 0)

    def _still_ours(self) -> os.stat_result | None:
        """The file's status when the name still leads to the file we made, else None."""
        if self._fd < 0:
            return None
        try:
            st = os.lstat(self.path)
        except OSError:
            return None
        if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and (st.st_dev, st.st_ino) == self._ident:
            return st
        return None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._ident = -1, None

    def __del__(self) -> None:  # an owner that never closed it (a test's bare engine) leaks no descriptor
        with suppress(Exception):
            self.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    offset = 0
    while offset < len(view):
        offset += os.pwrite(fd, view[offset:], offset)


def _made_and_renamed_into_place(path: Path, data: bytes, mode: int) -> int:
    """A new file holding `data`, renamed to `path`; its descriptor, open for writing.

    The temporary name is predictable and the directory may be the agent's: whatever stands
    there, a link planted to carry our write elsewhere included, is removed rather than opened.
    """
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(3):
        try:
            fd = os.open(tmp, flags, mode)
            break
        except FileExistsError:
            os.unlink(tmp)  # a link or a file a killed predecessor left; a directory raises here
    else:
        fd = os.open(tmp, flags, mode)
    try:
        _write_all(fd, data)
        os.fchmod(fd, mode)  # whatever the umask took away; on the file we made, never a link's target
        os.replace(tmp, path)
    except BaseException:
        os.close(fd)
        with suppress(OSError):
            os.unlink(tmp)
        raise
    return fd
