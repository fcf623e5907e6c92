"""One pass over the working tree against the staged tree: what changed, vanished or is new.

The walk only enters directories the index knows, lstat-ing each tracked file once and
comparing the result with the signature cached in its entry; nothing is read or hashed here.
Entries the index does not know are reported unjudged: whether the ignore rules keep them is
decided afterwards, for the few there are, by the caller that needs to know.
"""

from __future__ import annotations

import errno
import os
from stat import S_ISDIR

import attrs

from crucible_core.api import RunFailed
from crucible_world_git.index_file import MODE_GITLINK
from crucible_world_git.staged_tree import DirNode, StagedTree


@attrs.define
class Scan:
    # (directory node, name, path, lstat) of tracked files whose signature no longer matches,
    # or which are racily clean (modified in the same clock tick the index was written).
    suspects: list[tuple[DirNode, bytes, bytes, os.stat_result]] = attrs.field(factory=list)
    # Tracked files with nothing, or a directory, where they were.
    missing: list[bytes] = attrs.field(factory=list)
    # Tracked directories with nothing, or a file, where they were.
    missing_dirs: list[bytes] = attrs.field(factory=list)
    # (path, is_directory) of entries the index does not know.
    untracked: list[tuple[bytes, bool]] = attrs.field(factory=list)
    # Tracked gitlinks (nested repositories) present as directories.
    gitlinks: list[bytes] = attrs.field(factory=list)


_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY


def scan_worktree(root: bytes, staged: StagedTree, racy_ns: int) -> Scan:
    """Compare the working tree under `root` (absolute, bytes) with `staged`.

    `racy_ns` is the index file's mtime: a file modified at or after it may have changed
    without its signature changing, so it is always a suspect.
    """
    scan = Scan()
    try:
        os.listdir(root)
    except OSError as exc:
        raise RunFailed(
            f"cannot read the workspace {os.fsdecode(root)}: {exc}", hint="re-create the workspace"
        ) from exc
    _scan_dir(root + b"/", b"", staged.root, racy_ns, scan)
    return scan


def _scan_dir(abs_prefix: bytes, prefix: bytes, node: DirNode, racy_ns: int, scan: Scan) -> None:
    # Listing names and lstat-ing each tracked one relative to the directory's descriptor
    # costs measurably less than os.scandir's DirEntry objects for every file.
    try:
        # O_NOFOLLOW on the directory itself (not the workspace root, which may be reached
        # through a link): a symlink where a tracked directory was is not that directory.
        fd = os.open(abs_prefix[:-1] if prefix else abs_prefix, _OPEN_DIR | (os.O_NOFOLLOW if prefix else 0))
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            raise
        directory = prefix[:-1]
        scan.missing_dirs.append(directory)
        if exc.errno != errno.ENOENT:
            scan.untracked.append((directory, False))
        return
    try:
        names = os.listdir(abs_prefix)
    except OSError:
        os.close(fd)
        raise
    files = node.files
    dirs = node.dirs
    lstat = os.lstat
    suspects = scan.suspects
    try:
        for name, entry in files.items():
            try:
                st = lstat(name, dir_fd=fd)
            except (FileNotFoundError, NotADirectoryError):
                scan.missing.append(prefix + name)
                continue
            mtime = st.st_mtime_ns
            if (
                mtime >= racy_ns
                or entry.quick != (mtime, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode)
                or entry.mode == MODE_GITLINK
            ):
                if not S_ISDIR(st.st_mode):
                    suspects.append((node, name, prefix + name, st))
                elif entry.mode == MODE_GITLINK:
                    scan.gitlinks.append(prefix + name)
                else:
                    scan.missing.append(prefix + name)
                    scan.untracked.append((prefix + name, True))
        if len(names) != len(files) + len(dirs) or any(
            name not in files and name not in dirs for name in names
        ):
            for name in sorted(set(names).difference(files, dirs)):
                if name == b".git":
                    continue  # git never tracks a .git entry; a nested repository's own is its business
                try:
                    is_dir = S_ISDIR(lstat(name, dir_fd=fd).st_mode)
                except FileNotFoundError:
                    continue
                scan.untracked.append((prefix + name, is_dir))
    finally:
        os.close(fd)
    for name, sub in dirs.items():
        _scan_dir(abs_prefix + name + b"/", prefix + name + b"/", sub, racy_ns, scan)
